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
// and, in "stack" mode, messages to the member whose port is PORT (over
// Tribes' TCP channel, as a Tomcat cluster sends them):
//   send PORT OPTIONS     a serialized String with those channel options:
//                         SENT <ms> | FAILED <ms> <exception>
//   rpc PORT              an RpcChannel request (first reply, 10 s timeout):
//                         RPC <replies> <ms>
//   getall PORT CONTEXT   a DeltaManager's "send me all sessions" request;
//                         the answer is reported when it arrives:
//                         SESSION <event type> <context> <timestamp> <ms>
//
// Usage: TribesNode MODE GROUP PORT BIND MEMBER_PORT DOMAIN PAYLOAD_HEX FREQUENCY DROP_TIME [TTL [unbound]]
//   TTL: the multicast TTL (hop limit), 0 (this host only) unless given;
//   unbound: BIND is our host (and the receiver's address) but not the
//   McastService's bind (mcastBindAddress): the JDK chooses the card;
// MODE is one of
//   plain: a bare McastService (membership only);
//   stack: Tomcat's default cluster stack, GroupChannel + NioReceiver + TcpFailureDetector;
//   cloud: GroupChannel + NioReceiver with Tomcat's CloudMembershipService and
//     DNSMembershipProvider instead of multicast (GROUP, PORT, DOMAIN and TTL
//     unused). The provider reads the name from the environment variable
//     DNS_MEMBERSHIP_SERVICE_NAME and asks the JVM's resolver every FREQUENCY
//     ms (the channel's heartbeat); a member gone from the answer expires
//     after DROP_TIME ms (expirationTime). Events and "members" are the
//     channel's view, what a Tomcat cluster sees;
//   cloud-fd: cloud with a TcpFailureDetector, as SimpleTcpCluster adds it by default.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.Serializable;
import java.net.InetAddress;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;

import org.apache.catalina.ha.session.SessionMessage;
import org.apache.catalina.ha.session.SessionMessageImpl;
import org.apache.catalina.tribes.Channel;
import org.apache.catalina.tribes.ChannelListener;
import org.apache.catalina.tribes.Member;
import org.apache.catalina.tribes.MembershipListener;
import org.apache.catalina.tribes.MembershipService;
import org.apache.catalina.tribes.group.GroupChannel;
import org.apache.catalina.tribes.group.Response;
import org.apache.catalina.tribes.group.RpcCallback;
import org.apache.catalina.tribes.group.RpcChannel;
import org.apache.catalina.tribes.group.interceptors.TcpFailureDetector;
import org.apache.catalina.tribes.io.ChannelData;
import org.apache.catalina.tribes.io.XByteBuffer;
import org.apache.catalina.tribes.membership.McastService;
import org.apache.catalina.tribes.membership.cloud.CloudMembershipService;
import org.apache.catalina.tribes.transport.nio.NioReceiver;

public class TribesNode implements MembershipListener {

    static volatile long getAllSentAt;

    static Member byPort(Member[] members, int port) {
        for (Member m : members) {
            if (m.getPort() == port) {
                return m;
            }
        }
        return null;
    }

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
        int ttl = args.length > 9 ? Integer.parseInt(args[9]) : 0;
        boolean unbound = args.length > 10 && args[10].equals("unbound");

        TribesNode listener = new TribesNode();
        GroupChannel channel = new GroupChannel();
        ScheduledExecutorService executor = Executors.newScheduledThreadPool(2);
        channel.setUtilityExecutor(executor);
        boolean cloud = mode.startsWith("cloud");
        MembershipService service;
        if (mode.equals("plain")) {
            service = new McastService();
            service.setChannel(channel);
        } else {
            if (cloud) {
                CloudMembershipService dns = new CloudMembershipService();
                dns.setMembershipProviderClassName(
                        "org.apache.catalina.tribes.membership.cloud.DNSMembershipProvider");
                dns.setExpirationTime(dropTime);
                channel.setMembershipService(dns);
                // The provider polls DNS on the channel's heartbeat.
                channel.setHeartbeatSleeptime(frequency);
            }
            service = channel.getMembershipService();
            NioReceiver receiver = (NioReceiver) channel.getChannelReceiver();
            receiver.setAddress(bind);
            receiver.setPort(memberPort);
            receiver.setAutoBind(1);
            if (!mode.equals("cloud")) {
                channel.addInterceptor(new TcpFailureDetector());
            }
            channel.addMembershipListener(listener);
            channel.addChannelListener(new ChannelListener() {
                @Override
                public boolean accept(Serializable msg, Member sender) {
                    return msg instanceof SessionMessage;
                }

                @Override
                public void messageReceived(Serializable msg, Member sender) {
                    SessionMessage reply = (SessionMessage) msg;
                    say("SESSION " + reply.getEventType() + " " + reply.getContextName() + " "
                            + reply.getTimestamp() + " "
                            + (System.currentTimeMillis() - getAllSentAt));
                }
            });
        }
        if (service instanceof McastService) {
            McastService mcast = (McastService) service;
            mcast.setAddress(group);
            mcast.setPort(port);
            if (!unbound) {
                mcast.setBind(bind);
            }
            mcast.setFrequency(frequency);
            mcast.setDropTime(dropTime);
            mcast.setTtl(ttl);
            if (!domain.equals("-")) {
                mcast.setDomain(domain);
            }
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
        RpcChannel rpc = mode.equals("plain") ? null
                : new RpcChannel("mcastmember-test".getBytes("ISO-8859-1"), channel, new RpcCallback() {
                    @Override
                    public Serializable replyRequest(Serializable msg, Member sender) {
                        return null;
                    }

                    @Override
                    public void leftOver(Serializable msg, Member sender) {
                    }
                });

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            line = line.trim();
            // The cloud modes list what the channel's application sees (past
            // the failure detector); the others what the membership service holds.
            Member[] members = cloud ? channel.getMembers() : service.getMembers();
            if (line.equals("members")) {
                for (Member m : members) {
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
            } else if (line.startsWith("send ")) {
                String[] words = line.split(" ");
                Member to = byPort(members, Integer.parseInt(words[1]));
                long start = System.currentTimeMillis();
                try {
                    channel.send(new Member[] { to }, "replicated data", Integer.parseInt(words[2]));
                    say("SENT " + (System.currentTimeMillis() - start));
                } catch (Exception e) {
                    say("FAILED " + (System.currentTimeMillis() - start) + " " + e.toString().replace('\n', ' '));
                }
            } else if (line.startsWith("rpc ")) {
                Member to = byPort(members, Integer.parseInt(line.substring(4)));
                long start = System.currentTimeMillis();
                Response[] replies = rpc.send(new Member[] { to }, "who runs this?", RpcChannel.FIRST_REPLY,
                        Channel.SEND_OPTIONS_DEFAULT, 10000);
                say("RPC " + replies.length + " " + (System.currentTimeMillis() - start));
            } else if (line.startsWith("getall ")) {
                String[] words = line.split(" ");
                Member to = byPort(members, Integer.parseInt(words[1]));
                SessionMessage get = new SessionMessageImpl(words[2], SessionMessage.EVT_GET_ALL_SESSIONS,
                        null, "GET-ALL", "GET-ALL-" + words[2]);
                getAllSentAt = System.currentTimeMillis();
                get.setTimestamp(getAllSentAt);
                channel.send(new Member[] { to }, get, Channel.SEND_OPTIONS_ASYNCHRONOUS);
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
