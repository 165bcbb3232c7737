// Test vectors for mcastmember.gossip, produced by memberlist's own code.
//
// This file is compiled INSIDE a copy of memberlist's package (see gen.sh),
// so that it can call the unexported functions memberlist itself uses on the
// wire: encode(), makeCompoundMessage(), compressPayload(), encryptPayload(),
// sendLocalState(), sendUserMsg(), rawSendMsgPacket(), rawSendMsgStream().
// Nothing here re-implements the wire: every byte in vectors.json comes out of
// memberlist 0.2.2 (Debian's golang-github-hashicorp-memberlist-dev, the
// version under Debian's serf 0.9.4).
//
// Nonces: encryptPayload reads crypto/rand.Reader, a package variable; it is
// swapped for a fixed byte source around each encryption so the ciphertexts
// are reproducible.
package memberlist

import (
	"bytes"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"log"
	"math/rand"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

var vectorsOut = flag.String("out", "vectors.json", "where to write the vectors")

type msgVector struct {
	Name   string      `json:"name"`
	Type   string      `json:"type"`
	Fields interface{} `json:"fields"` // the Go struct as encoding/json writes it ([]byte as base64)
	Wire   string      `json:"wire"`   // hex of encode(type, &struct): type byte + msgpack body
}

type lzwVector struct {
	Name  string `json:"name"`
	Plain string `json:"plain"` // hex
	LZW   string `json:"lzw"`   // hex of compress/lzw LSB, litWidth 8 output
	Wire  string `json:"wire"`  // hex of compressPayload(): a compress message
}

type cryptoVector struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	Key     string `json:"key"`   // hex
	Nonce   string `json:"nonce"` // hex
	AAD     string `json:"aad"`   // hex, the associated data
	Plain   string `json:"plain"` // hex
	Wire    string `json:"wire"`  // hex of encryptPayload() output
}

type frameVector struct {
	Name  string            `json:"name"`
	Parts []string          `json:"parts,omitempty"` // hex of each part
	Extra map[string]string `json:"extra,omitempty"`
	Wire  string            `json:"wire"`
}

type vectors struct {
	Source   string         `json:"source"`
	Messages []msgVector    `json:"messages"`
	LZW      []lzwVector    `json:"lzw"`
	Crypto   []cryptoVector `json:"crypto"`
	Frames   []frameVector  `json:"frames"`
}

// recordingConn is a net.Conn that keeps what is written to it.
type recordingConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *recordingConn) Write(b []byte) (int, error)   { return c.buf.Write(b) }
func (c *recordingConn) SetDeadline(t time.Time) error { return nil }
func (c *recordingConn) Close() error                  { return nil }
func (c *recordingConn) RemoteAddr() net.Addr          { return &net.TCPAddr{} }

// recordingTransport hands out recordingConns and keeps the packets sent.
type recordingTransport struct {
	conn    *recordingConn
	packets [][]byte
}

func (t *recordingTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.IPv4(127, 0, 0, 1), 7946, nil
}
func (t *recordingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.packets = append(t.packets, append([]byte(nil), b...))
	return time.Time{}, nil
}
func (t *recordingTransport) WriteToAddress(b []byte, a Address) (time.Time, error) {
	return t.WriteTo(b, a.Addr)
}
func (t *recordingTransport) PacketCh() <-chan *Packet  { return nil }
func (t *recordingTransport) StreamCh() <-chan net.Conn { return nil }
func (t *recordingTransport) Shutdown() error           { return nil }
func (t *recordingTransport) IngestPacket(net.Conn, net.Addr, time.Time, bool) error {
	return nil
}
func (t *recordingTransport) IngestStream(net.Conn) error { return nil }
func (t *recordingTransport) DialTimeout(string, time.Duration) (net.Conn, error) {
	t.conn = &recordingConn{}
	return t.conn, nil
}
func (t *recordingTransport) DialAddressTimeout(a Address, d time.Duration) (net.Conn, error) {
	return t.DialTimeout(a.Addr, d)
}

// stateDelegate gives sendLocalState a fixed user state.
type stateDelegate struct{ state []byte }

func (d *stateDelegate) NodeMeta(int) []byte             { return nil }
func (d *stateDelegate) NotifyMsg([]byte)                {}
func (d *stateDelegate) GetBroadcasts(int, int) [][]byte { return nil }
func (d *stateDelegate) LocalState(bool) []byte          { return d.state }
func (d *stateDelegate) MergeRemoteState([]byte, bool)   {}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func h(b []byte) string { return hex.EncodeToString(b) }

// withNonce runs f with crypto/rand.Reader returning nonce first.
func withNonce(nonce []byte, f func()) {
	saved := crand.Reader
	crand.Reader = io.MultiReader(bytes.NewReader(nonce), saved)
	defer func() { crand.Reader = saved }()
	f()
}

func vectorMemberlist(t *recordingTransport, protocol uint8, keys [][]byte, compression bool, state []byte) *Memberlist {
	conf := DefaultLANConfig()
	conf.ProtocolVersion = protocol
	conf.EnableCompression = compression
	if len(keys) > 0 {
		ring, err := NewKeyring(keys[1:], keys[0])
		must(err)
		conf.Keyring = ring
	}
	if state != nil {
		conf.Delegate = &stateDelegate{state}
	}
	return &Memberlist{
		config:    conf,
		transport: t,
		nodeMap:   map[string]*nodeState{},
		logger:    log.New(io.Discard, "", 0),
	}
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestGossipVectors(t *testing.T) {
	v := vectors{Source: "hashicorp/memberlist 0.2.2 (Debian golang-github-hashicorp-memberlist-dev), go-msgpack 0.5.x"}
	ip4 := []byte(net.IPv4(10, 0, 0, 7).To4())
	ip6 := []byte(net.ParseIP("fd00::1"))
	long := strings.Repeat("n", 40)                        // 40 bytes: past fixraw (31), so raw16
	longName := "node-" + hex.EncodeToString(fill(150, 1)) // 305 bytes: raw16
	meta := append([]byte{0xff}, fill(300, 3)...)
	vsn := []uint8{1, 5, 2, 2, 5, 4}

	add := func(name, typ string, mt messageType, in interface{}) {
		out, err := encode(mt, in)
		must(err)
		v.Messages = append(v.Messages, msgVector{name, typ, in, h(out.Bytes())})
	}
	add("ping-minimal", "ping", pingMsg, &ping{SeqNo: 0, Node: ""})
	add("ping-full", "ping", pingMsg, &ping{SeqNo: 200, Node: "serf-1", SourceAddr: ip4, SourcePort: 7946, SourceNode: "py-1"})
	add("ping-big-seq", "ping", pingMsg, &ping{SeqNo: 4294967295, Node: long, SourceAddr: ip6, SourcePort: 65535, SourceNode: longName})
	add("indirect-ping", "indirect_ping", indirectPingMsg, &indirectPingReq{SeqNo: 70000, Target: ip4, Port: 7946, Node: "serf-2", Nack: true,
		SourceAddr: ip4, SourcePort: 8000, SourceNode: "py-1"})
	add("indirect-ping-old", "indirect_ping", indirectPingMsg, &indirectPingReq{SeqNo: 1, Target: ip6, Port: 0, Node: "n"})
	add("ack-empty", "ack", ackRespMsg, &ackResp{SeqNo: 5, Payload: nil})
	add("ack-payload", "ack", ackRespMsg, &ackResp{SeqNo: 65536, Payload: fill(20, 9)})
	add("nack", "nack", nackRespMsg, &nackResp{SeqNo: 255})
	add("err", "err", errMsg, &errResp{Error: "Remote state is encrypted and encryption is not configured"})
	add("suspect", "suspect", suspectMsg, &suspect{Incarnation: 3, Node: "serf-2", From: "py-1"})
	add("alive", "alive", aliveMsg, &alive{Incarnation: 1, Node: "py-1", Addr: ip4, Port: 7946, Meta: []byte{0xff, 0x80}, Vsn: vsn})
	add("alive-long-meta", "alive", aliveMsg, &alive{Incarnation: 128, Node: longName, Addr: ip6, Port: 7946, Meta: meta, Vsn: vsn})
	add("alive-no-meta", "alive", aliveMsg, &alive{Incarnation: 0, Node: "x", Addr: ip4, Port: 1, Meta: nil, Vsn: vsn})
	add("dead", "dead", deadMsg, &dead{Incarnation: 9, Node: "serf-3", From: "serf-3"})
	add("push-pull-header", "push_pull_header", pushPullMsg, &pushPullHeader{Nodes: 2, UserStateLen: 300, Join: true})
	add("push-pull-header-zero", "push_pull_header", pushPullMsg, &pushPullHeader{Nodes: 0, UserStateLen: 0, Join: false})
	add("push-node-state", "push_node_state", pushPullMsg, &pushNodeState{Name: "serf-1", Addr: ip4, Port: 7946, Meta: []byte{0xff, 0x80},
		Incarnation: 70000, State: StateSuspect, Vsn: vsn})
	add("user-msg-header", "user_msg_header", userMsg, &userMsgHeader{UserMsgLen: 1000})
	add("compress", "compress", compressMsg, &compress{Algo: lzwAlgo, Buf: fill(3, 0)})

	// LZW, through compressPayload (memberlist's writer) and checked back
	// through decompressPayload (its reader).
	rng := rand.New(rand.NewSource(26))
	random := make([]byte, 6000)
	rng.Read(random)
	repetitive := bytes.Repeat([]byte("memberlist gossip "), 600)
	lzwInputs := []struct {
		name  string
		plain []byte
	}{
		{"empty", []byte{}},
		{"one-byte", []byte{'a'}},
		{"abc-repeats", []byte("TOBEORNOTTOBEORTOBEORNOT#")},
		{"repetitive-10k", repetitive},
		{"zeros-5000", make([]byte, 5000)},
		{"random-6000", random}, // fills the 4096-code table: the clear code and width reset
		{"alive-message", func() []byte {
			b, _ := encode(aliveMsg, &alive{Incarnation: 1, Node: "py-1", Addr: ip4, Port: 7946, Vsn: vsn})
			return b.Bytes()
		}()},
	}
	for _, in := range lzwInputs {
		out, err := compressPayload(in.plain)
		must(err)
		var c compress
		must(decode(out.Bytes()[1:], &c))
		back, err := decompressPayload(out.Bytes()[1:])
		must(err)
		if !bytes.Equal(back, in.plain) {
			t.Fatalf("lzw %s does not round trip", in.name)
		}
		v.LZW = append(v.LZW, lzwVector{in.name, h(in.plain), h(c.Buf), h(out.Bytes())})
	}

	// Encryption: encryptPayload with fixed nonces, both versions, every key size.
	keys := [][]byte{fill(16, 0x10), fill(24, 0x20), fill(32, 0x30)}
	plains := [][]byte{[]byte{}, []byte("hello"), fill(16, 1), fill(100, 2)}
	for ki, key := range keys {
		for vsn := 0; vsn <= 1; vsn++ {
			for pi, plain := range plains {
				for _, aad := range [][]byte{nil, []byte("label-a")} {
					if aad != nil && pi != 1 {
						continue
					}
					nonce := fill(12, byte(ki*16+vsn*4+pi))
					var buf bytes.Buffer
					withNonce(nonce, func() { must(encryptPayload(encryptionVersion(vsn), key, plain, aad, &buf)) })
					back, err := decryptPayload([][]byte{keys[(ki+1)%3], key}, buf.Bytes(), aad)
					must(err)
					if !bytes.Equal(back, plain) {
						t.Fatalf("decrypt mismatch")
					}
					name := "aes" + []string{"128", "192", "256"}[ki] + "-v" + string(rune('0'+vsn)) + "-p" + string(rune('0'+pi))
					if aad != nil {
						name += "-aad"
					}
					v.Crypto = append(v.Crypto, cryptoVector{name, vsn, h(key), h(nonce), h(aad), h(plain), h(buf.Bytes())})
				}
			}
		}
	}

	// Frames: compound, CRC on packets, encrypted packets and streams, push/pull and user streams.
	var parts [][]byte
	for _, name := range []string{"ping-full", "suspect", "alive", "dead"} {
		for _, m := range v.Messages {
			if m.Name == name {
				b, _ := hex.DecodeString(m.Wire)
				parts = append(parts, b)
			}
		}
	}
	compound := makeCompoundMessage(parts).Bytes()
	hexParts := func(ps [][]byte) []string {
		out := []string{}
		for _, p := range ps {
			out = append(out, h(p))
		}
		return out
	}
	v.Frames = append(v.Frames, frameVector{Name: "compound-4", Parts: hexParts(parts), Wire: h(compound)})
	v.Frames = append(v.Frames, frameVector{Name: "compound-0", Parts: []string{}, Wire: h(makeCompoundMessage(nil).Bytes())})
	// decodeCompoundMessage on a cut compound: Go reports how many parts it lost.
	cut := compound[1 : len(compound)-3]
	trunc, got, err := decodeCompoundMessage(cut)
	must(err)
	v.Frames = append(v.Frames, frameVector{Name: "compound-cut", Parts: hexParts(got),
		Extra: map[string]string{"truncated": string(rune('0' + trunc))}, Wire: h(compound[:len(compound)-3])})

	packet := func(name string, protocol uint8, keys [][]byte, compression bool, node *Node, msg []byte, nonce []byte) {
		tr := &recordingTransport{}
		m := vectorMemberlist(tr, protocol, keys, compression, nil)
		withNonce(nonce, func() { must(m.rawSendMsgPacket(Address{Addr: "10.0.0.8:7946", Name: "serf-1"}, node, msg)) })
		extra := map[string]string{"protocol": string(rune('0' + protocol))}
		if len(keys) > 0 {
			extra["key"] = h(keys[0])
			extra["nonce"] = h(nonce)
		}
		if node != nil {
			extra["pmax"] = string(rune('0' + node.PMax))
		}
		if compression {
			extra["compression"] = "1"
		}
		v.Frames = append(v.Frames, frameVector{Name: name, Parts: []string{h(msg)}, Extra: extra, Wire: h(tr.packets[0])})
	}
	nonce := fill(12, 0x77)
	packet("packet-plain", 2, nil, false, &Node{PMax: 4}, parts[0], nil)
	packet("packet-crc", 2, nil, false, &Node{PMax: 5}, parts[0], nil)
	packet("packet-crc-compound", 2, nil, false, &Node{PMax: 5}, compound, nil)
	packet("packet-compressed", 2, nil, true, &Node{PMax: 4}, compound, nil)
	packet("packet-compressed-crc", 2, nil, true, &Node{PMax: 5}, compound, nil)
	packet("packet-encrypted-v1-crc", 2, [][]byte{keys[0], keys[2]}, false, &Node{PMax: 5}, parts[0], nonce)
	packet("packet-encrypted-v0", 1, [][]byte{keys[1]}, false, &Node{PMax: 4}, parts[0], nonce)
	packet("packet-encrypted-compressed-crc", 5, [][]byte{keys[2], keys[0]}, true, &Node{PMax: 5}, compound, nonce)

	stream := func(name string, protocol uint8, keys [][]byte, compression bool, join bool, state []byte) {
		tr := &recordingTransport{}
		m := vectorMemberlist(tr, protocol, keys, compression, state)
		states := []*nodeState{
			{Node: Node{Name: "serf-1", Addr: net.IP(ip4), Port: 7946, Meta: []byte{0xff, 0x80}, PMin: 1, PMax: 5, PCur: 2, DMin: 2, DMax: 5, DCur: 4},
				Incarnation: 3, State: StateAlive},
			{Node: Node{Name: "py-1", Addr: net.IP(ip6), Port: 7947, Meta: meta, PMin: 1, PMax: 5, PCur: 2, DMin: 2, DMax: 5, DCur: 4},
				Incarnation: 70000, State: StateDead},
		}
		m.nodes = states
		conn := &recordingConn{}
		withNonce(nonce, func() { must(m.sendLocalState(conn, join)) })
		extra := map[string]string{"protocol": string(rune('0' + protocol)), "state": h(state)}
		if len(keys) > 0 {
			extra["key"] = h(keys[0])
			extra["nonce"] = h(nonce)
		}
		if compression {
			extra["compression"] = "1"
		}
		if join {
			extra["join"] = "1"
		}
		v.Frames = append(v.Frames, frameVector{Name: name, Extra: extra, Wire: h(conn.buf.Bytes())})
	}
	userState := fill(300, 5)
	stream("push-pull-plain", 2, nil, false, true, userState)
	stream("push-pull-no-state", 2, nil, false, false, nil)
	stream("push-pull-compressed", 2, nil, true, false, userState)
	stream("push-pull-encrypted-v1", 2, [][]byte{keys[0]}, false, true, userState)
	stream("push-pull-compressed-encrypted-v1", 4, [][]byte{keys[2], keys[1]}, true, false, userState)
	stream("push-pull-encrypted-v0", 1, [][]byte{keys[1]}, false, false, userState)

	userStream := func(name string, keys [][]byte, compression bool, msg []byte) {
		tr := &recordingTransport{}
		m := vectorMemberlist(tr, 2, keys, compression, nil)
		withNonce(nonce, func() { must(m.sendUserMsg(Address{Addr: "10.0.0.8:7946", Name: "serf-1"}, msg)) })
		extra := map[string]string{}
		if len(keys) > 0 {
			extra["key"] = h(keys[0])
			extra["nonce"] = h(nonce)
		}
		if compression {
			extra["compression"] = "1"
		}
		v.Frames = append(v.Frames, frameVector{Name: name, Parts: []string{h(msg)}, Extra: extra, Wire: h(tr.conn.buf.Bytes())})
	}
	userStream("user-stream", nil, false, []byte("\x06serf user event"))
	userStream("user-stream-compressed-encrypted", [][]byte{keys[0]}, true, fill(200, 4))

	f, err := os.Create(*vectorsOut)
	must(err)
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", " ")
	must(enc.Encode(&v))
}
