// A Tomcat Tribes membership node for mcastmember's interop tests.
//
// Runs Tomcat's own code (tomcat10-tribes.jar) on loopback and reports its
// membership events on stdout, one line each, for the Python tests to read:
//   READY <uniqueId hex>
//   ADDED <host> <port> <uniqueId> <domain hex> <payload hex> <command hex>
//   GONE  <host> <port> <uniqueId> <domain hex> <payload hex> <command hex>
//   MEMBER ... (same fields, one per member, answering "members"), then END
// Empty byte fields are written as "-". Commands on stdin, one per line:
//   members | payload <hex> | broadcast | stop
//
// Usage: TribesNode plain|stack GROUP PORT BIND MEMBER_PORT DOMAIN PAYLOAD_HEX FREQUENCY DROP_TIME
//   plain: a bare McastService (membership only);
//   stack: Tomcat's default cluster stack, GroupChannel + NioReceiver + TcpFailureDetector.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;

import org.apache.catalina.tribes.Channel;
import org.apache.catalina.tribes.Member;
import org.apache.catalina.tribes.MembershipListener;
import org.apache.catalina.tribes.MembershipService;
import org.apache.catalina.tribes.group.GroupChannel;
import org.apache.catalina.tribes.group.interceptors.TcpFailureDetector;
import org.apache.catalina.tribes.io.ChannelData;
import org.apache.catalina.tribes.io.XByteBuffer;
import org.apache.catalina.tribes.membership.McastService;
import org.apache.catalina.tribes.transport.nio.NioReceiver;

public class TribesNode implements MembershipListener {

    static String hex(byte[] data) {
        if (data == null || data.length == 0) {
            return "-";
        }
        StringBuilder out = new StringBuilder();
        for (byte b : data) {
            out.append(String.format("%02x", b & 0xff));
        }
        return out.toString();
    }

    static byte[] unhex(String text) {
        if (text.equals("-")) {
            return new byte[0];
        }
        byte[] out = new byte[text.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(text.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String describe(Member m) throws Exception {
        return InetAddress.getByAddress(m.getHost()).getHostAddress() + " " + m.getPort() + " "
                + hex(m.getUniqueId()) + " " + hex(m.getDomain()) + " " + hex(m.getPayload())
                + " " + hex(m.getCommand());
    }

    @Override
    public void memberAdded(Member member) {
        try {
            say("ADDED " + describe(member));
        } catch (Exception e) {
            say("ERROR " + e);
        }
    }

    @Override
    public void memberDisappeared(Member member) {
        try {
            say("GONE " + describe(member));
        } catch (Exception e) {
            say("ERROR " + e);
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args[0];
        String group = args[1];
        int port = Integer.parseInt(args[2]);
        String bind = args[3];
        int memberPort = Integer.parseInt(args[4]);
        String domain = args[5];
        byte[] payload = unhex(args[6]);
        long frequency = Long.parseLong(args[7]);
        long dropTime = Long.parseLong(args[8]);

        TribesNode listener = new TribesNode();
        GroupChannel channel = new GroupChannel();
        ScheduledExecutorService executor = Executors.newScheduledThreadPool(2);
        channel.setUtilityExecutor(executor);
        McastService service;
        if (mode.equals("plain")) {
            service = new McastService();
            service.setChannel(channel);
        } else {
            service = (McastService) channel.getMembershipService();
            NioReceiver receiver = (NioReceiver) channel.getChannelReceiver();
            receiver.setAddress(bind);
            receiver.setPort(memberPort);
            receiver.setAutoBind(1);
            channel.addInterceptor(new TcpFailureDetector());
            channel.addMembershipListener(listener);
        }
        service.setAddress(group);
        service.setPort(port);
        service.setBind(bind);
        service.setFrequency(frequency);
        service.setDropTime(dropTime);
        service.setTtl(0);
        if (!domain.equals("-")) {
            service.setDomain(domain);
        }
        service.setPayload(payload);
        if (mode.equals("plain")) {
            service.setLocalMemberProperties(bind, memberPort, -1, -1);
            service.setMembershipListener(listener);
            service.start(MembershipService.MBR_RX | MembershipService.MBR_TX);
        } else {
            channel.start(Channel.DEFAULT);
        }
        say("READY " + hex(service.getLocalMember(false).getUniqueId()));

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            if (line.equals("members")) {
                for (Member m : service.getMembers()) {
                    say("MEMBER " + describe(m));
                }
                say("END");
            } else if (line.startsWith("payload ")) {
                service.setPayload(unhex(line.substring(8)));
                say("OK");
            } else if (line.equals("broadcast")) {
                ChannelData data = new ChannelData(true);
                data.setAddress(service.getLocalMember(false));
                data.setTimestamp(System.currentTimeMillis());
                byte[] body = "hello from tomcat".getBytes("ISO-8859-1");
                data.setMessage(new XByteBuffer(body, false));
                service.broadcast(data);
                say("OK");
            } else if (line.equals("stop")) {
                break;
            }
        }
        if (mode.equals("plain")) {
            service.stop(MembershipService.MBR_RX | MembershipService.MBR_TX);
        } else {
            channel.stop(Channel.DEFAULT);
        }
        executor.shutdownNow();
        say("STOPPED");
        System.exit(0);
    }
}
