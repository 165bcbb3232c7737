// Per-heartbeat cost of Tomcat Tribes 10.1's own membership code, for
// bench/heartbeat.py's side-by-side table. Measures, after JIT warm-up:
//   send: what McastServiceImpl does per heartbeat besides the socket call:
//         refresh the alive time, MemberImpl.getData() (the cached packet with
//         the alive bytes rewritten) and a new DatagramPacket around it;
//   recv: what it does per packet of an already known member besides the
//         socket call: copy the datagram out, MemberImpl.getMember(data) and
//         Membership.memberAlive(member).
// Bytes come from the JVM's per-thread allocation counter.
// Prints one JSON object: {"send_ns", "send_bytes", "recv_ns", "recv_bytes"}.
import java.lang.management.ManagementFactory;
import java.net.DatagramPacket;
import java.net.InetSocketAddress;

import org.apache.catalina.tribes.Member;
import org.apache.catalina.tribes.membership.MemberImpl;
import org.apache.catalina.tribes.membership.Membership;

public class TribesBench {
    static volatile Object sink;

    static long allocated() {
        com.sun.management.ThreadMXBean bean =
                (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        return bean.getThreadAllocatedBytes(Thread.currentThread().getId());
    }

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 2_000_000;
        MemberImpl local = new MemberImpl("127.0.0.1", 4000, 0);
        local.setUniqueId(new byte[16]);
        MemberImpl sender = new MemberImpl("127.0.0.1", 4001, 0);
        byte[] uid = new byte[16];
        uid[0] = 1;
        sender.setUniqueId(uid);
        sender.setDomain("dom".getBytes("ISO-8859-1"));
        InetSocketAddress group = new InetSocketAddress("228.0.0.4", 45564);
        long start = System.currentTimeMillis();

        // send
        double sendNs = 0;
        long sendBytes = 0;
        for (int pass = 0; pass < 3; pass++) {      // passes 0-1 warm the JIT up
            long a0 = allocated();
            long t0 = System.nanoTime();
            for (int i = 0; i < rounds; i++) {
                sender.setMemberAliveTime(System.currentTimeMillis() - start);
                byte[] data = sender.getData();
                sink = new DatagramPacket(data, data.length, group);
            }
            long t1 = System.nanoTime();
            sendNs = (double) (t1 - t0) / rounds;
            sendBytes = (allocated() - a0) / rounds;
        }

        // receive of a known member
        Membership membership = new Membership(local);
        byte[] wire = sender.getData();
        membership.memberAlive(MemberImpl.getMember(wire));
        byte[] received = new byte[65535];
        System.arraycopy(wire, 0, received, 0, wire.length);
        int length = wire.length;
        double recvNs = 0;
        long recvBytes = 0;
        for (int pass = 0; pass < 3; pass++) {
            long a0 = allocated();
            long t0 = System.nanoTime();
            for (int i = 0; i < rounds; i++) {
                byte[] data = new byte[length];
                System.arraycopy(received, 0, data, 0, length);
                Member m = MemberImpl.getMember(data);
                sink = membership.memberAlive(m) ? m : null;
            }
            long t1 = System.nanoTime();
            recvNs = (double) (t1 - t0) / rounds;
            recvBytes = (allocated() - a0) / rounds;
        }
        System.out.printf("{\"send_ns\": %.1f, \"send_bytes\": %d, \"recv_ns\": %.1f, \"recv_bytes\": %d}%n",
                sendNs, sendBytes, recvNs, recvBytes);
    }
}
