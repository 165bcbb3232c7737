// Serialized Tomcat messages for mcastmember's channel tests, made by Tomcat's
// own classes (Debian's libtomcat10-java), and a reader that checks that
// what mcastmember writes is what Tomcat reads.
//
//   TribesVectors vectors     prints NAME HEX lines: RPC (an RpcMessage
//                             request), RPC_LONG (one with a 300-byte rpc id),
//                             NO_REPLY (Tomcat's NoRpcChannelReply to RPC),
//                             GET_ALL (a DeltaManager's request for sessions)
//   TribesVectors read HEX    deserializes HEX as Tomcat does and prints what
//                             it is: RPC <reply> <uuid> <rpcId> | SESSION
//                             <event type> <context> <timestamp> | OTHER <class>
import java.lang.reflect.Field;

import org.apache.catalina.ha.session.SessionMessage;
import org.apache.catalina.ha.session.SessionMessageImpl;
import org.apache.catalina.tribes.group.RpcMessage;
import org.apache.catalina.tribes.io.XByteBuffer;

public class TribesVectors {

    static String hex(byte[] data) {
        StringBuilder out = new StringBuilder();
        for (byte b : data) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }

    static byte[] unhex(String text) {
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static Object field(Object target, String name) throws Exception {
        Field f = RpcMessage.class.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(target);
    }

    public static void main(String[] args) throws Exception {
        if (args[0].equals("vectors")) {
            byte[] uuid = new byte[16];
            for (int i = 0; i < 16; i++) {
                uuid[i] = (byte) (0xa0 + i);
            }
            byte[] rpcId = "map-ctx".getBytes("ISO-8859-1");
            System.out.println("RPC " + hex(XByteBuffer.serialize(new RpcMessage(rpcId, uuid, "hello"))));
            byte[] longId = new byte[300];
            for (int i = 0; i < longId.length; i++) {
                longId[i] = (byte) i;
            }
            System.out.println("RPC_LONG " + hex(XByteBuffer.serialize(new RpcMessage(longId, uuid, "hello"))));
            System.out.println("NO_REPLY " + hex(XByteBuffer.serialize(new RpcMessage.NoRpcChannelReply(rpcId, uuid))));
            SessionMessage get = new SessionMessageImpl("/shop", SessionMessage.EVT_GET_ALL_SESSIONS, null,
                    "GET-ALL", "GET-ALL-/shop");
            get.setTimestamp(1764760000123L);
            System.out.println("GET_ALL " + hex(XByteBuffer.serialize(get)));
        } else {
            byte[] data = unhex(args[1]);
            Object obj = XByteBuffer.deserialize(data, 0, data.length);
            if (obj instanceof RpcMessage) {
                System.out.println("RPC " + obj.getClass().getName() + " " + field(obj, "reply") + " "
                        + hex((byte[]) field(obj, "uuid")) + " " + hex((byte[]) field(obj, "rpcId")));
            } else if (obj instanceof SessionMessage) {
                SessionMessage msg = (SessionMessage) obj;
                System.out.println("SESSION " + msg.getEventType() + " " + msg.getContextName() + " "
                        + msg.getTimestamp());
            } else {
                System.out.println("OTHER " + obj.getClass().getName());
            }
        }
    }
}
