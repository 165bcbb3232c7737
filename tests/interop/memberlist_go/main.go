// A memberlist >= 0.3 node for mcastmember's interop tests, in two modes.
//
//	memberlist_go node -name N -bind ADDR -port P [-label L] [-key BASE64] [-push-pull MS] [-probe MS]
//
// runs one plain memberlist node (no Serf layer; it advertises Serf's
// delegate protocol range, 2-5, so a Serf member merges its state) and
// writes JSON lines on stdout: {"ready": "ADDR:PORT"} once listening,
// {"members": [{"name", "addr", "port", "state"}]} whenever Members()
// changes, {"joined": N, "error": "..."} after a join. Commands on stdin,
// one a line: "join ADDR:PORT", "quit".
//
//	memberlist_go vectors [-label L]
//
// runs two nodes in this process on loopback with a transport that records
// every byte written on each TCP connection, makes the second join the
// first and send it a reliable user message, in three cases (plain,
// compressed, compressed and encrypted with a fixed key), and writes the
// bytes as JSON: for each case the dialer's join stream (its label header
// then its push/pull), the listener's reply on that connection, and the
// dialer's user-message stream.
//
// Built in GOPATH mode (see gen.sh and README.md): written for
// mcastmember's tests, it uses only memberlist's exported API.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Serf's delegate protocol range, so that a Serf member's verifyProtocol
// takes this node (a bare memberlist application advertises 0-0).
const (
	serfProtocolMin = 2
	serfProtocolMax = 5
	serfProtocolCur = 4
)

var out = json.NewEncoder(os.Stdout)
var outLock sync.Mutex

func say(v interface{}) {
	outLock.Lock()
	defer outLock.Unlock()
	if err := out.Encode(v); err != nil {
		log.Fatal(err)
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: memberlist_go node|vectors [flags]")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "node":
		runNode(os.Args[2:])
	case "vectors":
		runVectors(os.Args[2:])
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", os.Args[1])
		os.Exit(2)
	}
}

func config(name, bind string, port int, label string, key []byte) *memberlist.Config {
	conf := memberlist.DefaultLocalConfig()
	conf.Name = name
	conf.BindAddr = bind
	conf.BindPort = port
	conf.AdvertiseAddr = bind
	conf.AdvertisePort = port
	conf.Label = label
	conf.DelegateProtocolMin = serfProtocolMin
	conf.DelegateProtocolMax = serfProtocolMax
	conf.DelegateProtocolVersion = serfProtocolCur
	if key != nil {
		conf.SecretKey = key
	}
	return conf
}

// ------------------------------------------------------------------ node

type memberView struct {
	Name  string `json:"name"`
	Addr  string `json:"addr"`
	Port  uint16 `json:"port"`
	State string `json:"state"`
}

var stateNames = map[memberlist.NodeStateType]string{
	memberlist.StateAlive: "alive", memberlist.StateSuspect: "suspect",
	memberlist.StateDead: "dead", memberlist.StateLeft: "left",
}

func view(m *memberlist.Memberlist) []memberView {
	var views []memberView
	for _, n := range m.Members() {
		views = append(views, memberView{n.Name, n.Addr.String(), n.Port, stateNames[n.State]})
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
	return views
}

func runNode(args []string) {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	name := fs.String("name", "go1", "node name")
	bind := fs.String("bind", "127.0.0.1", "address to bind and advertise")
	port := fs.Int("port", 7946, "port to bind and advertise")
	label := fs.String("label", "", "memberlist label")
	key := fs.String("key", "", "base64 encryption key")
	pushPull := fs.Int("push-pull", 1000, "push/pull interval, ms")
	probe := fs.Int("probe", 200, "probe interval, ms")
	fs.Parse(args)

	var secret []byte
	if *key != "" {
		var err error
		if secret, err = base64.StdEncoding.DecodeString(*key); err != nil {
			log.Fatalf("bad -key: %v", err)
		}
	}
	conf := config(*name, *bind, *port, *label, secret)
	conf.PushPullInterval = time.Duration(*pushPull) * time.Millisecond
	conf.ProbeInterval = time.Duration(*probe) * time.Millisecond
	conf.ProbeTimeout = conf.ProbeInterval / 2
	conf.LogOutput = os.Stderr
	m, err := memberlist.Create(conf)
	if err != nil {
		log.Fatalf("create: %v", err)
	}
	say(map[string]string{"ready": fmt.Sprintf("%s:%d", *bind, *port)})

	go func() {
		last := ""
		for {
			v := view(m)
			text, _ := json.Marshal(v)
			if string(text) != last {
				last = string(text)
				say(map[string]interface{}{"members": v})
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		switch {
		case len(fields) == 2 && fields[0] == "join":
			n, err := m.Join([]string{fields[1]})
			result := map[string]interface{}{"joined": n}
			if err != nil {
				result["error"] = err.Error()
			}
			say(result)
		case len(fields) == 1 && fields[0] == "quit":
			m.Shutdown()
			return
		}
	}
	m.Shutdown()
}

// --------------------------------------------------------------- vectors

// recordedConn keeps every byte written on a connection.
type recordedConn struct {
	net.Conn
	mu      sync.Mutex
	written []byte
}

func (c *recordedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.written = append(c.written, b...)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recordedConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.written...)
}

// recorder is a NetTransport whose dialled and accepted connections are
// recorded, in the order they were made.
type recorder struct {
	*memberlist.NetTransport
	mu       sync.Mutex
	dialled  []*recordedConn
	accepted []*recordedConn
	streams  chan net.Conn
}

func newRecorder(bind string) *recorder {
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{bind}, BindPort: 0, Logger: log.New(ioutil.Discard, "", 0)})
	if err != nil {
		log.Fatalf("transport: %v", err)
	}
	r := &recorder{NetTransport: nt, streams: make(chan net.Conn)}
	go func() {
		for conn := range nt.StreamCh() {
			rc := &recordedConn{Conn: conn}
			r.mu.Lock()
			r.accepted = append(r.accepted, rc)
			r.mu.Unlock()
			r.streams <- rc
		}
	}()
	return r
}

func (r *recorder) StreamCh() <-chan net.Conn { return r.streams }

func (r *recorder) dialled_(conn net.Conn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	rc := &recordedConn{Conn: conn}
	r.mu.Lock()
	r.dialled = append(r.dialled, rc)
	r.mu.Unlock()
	return rc, nil
}

func (r *recorder) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return r.dialled_(r.NetTransport.DialTimeout(addr, timeout))
}

func (r *recorder) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return r.dialled_(r.NetTransport.DialAddressTimeout(a, timeout))
}

func (r *recorder) conns() ([]*recordedConn, []*recordedConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*recordedConn(nil), r.dialled...), append([]*recordedConn(nil), r.accepted...)
}

type vectorCase struct {
	Name         string `json:"name"`
	Compression  bool   `json:"compression"`
	Key          string `json:"key"`
	JoinDialer   string `json:"join_dialer"`
	JoinReply    string `json:"join_reply"`
	UserDialer   string `json:"user_dialer"`
	UserPayload  string `json:"user_payload"`
	ListenerName string `json:"listener"`
	DialerName   string `json:"dialer"`
}

func waitFor(what string, done func() bool) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if done() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	log.Fatalf("timed out waiting for %s", what)
}

func oneCase(name, label string, compression bool, key []byte) vectorCase {
	rl, rd := newRecorder("127.0.0.1"), newRecorder("127.0.0.1")
	make_ := func(node string, r *recorder) *memberlist.Memberlist {
		conf := config(node, "127.0.0.1", r.GetAutoBindPort(), label, key)
		conf.Transport = r
		conf.EnableCompression = compression
		// no push/pull and no TCP ping of their own: only the join's and the user message's streams
		conf.PushPullInterval = 0
		conf.DisableTcpPings = true
		conf.LogOutput = ioutil.Discard
		m, err := memberlist.Create(conf)
		if err != nil {
			log.Fatalf("create %s: %v", node, err)
		}
		return m
	}
	listener, dialer := make_("go-listener", rl), make_("go-dialer", rd)
	defer listener.Shutdown()
	defer dialer.Shutdown()
	if _, err := dialer.Join([]string{listener.LocalNode().Address()}); err != nil {
		log.Fatalf("join: %v", err)
	}
	payload := []byte("hello over a stream")
	if err := dialer.SendReliable(listener.LocalNode(), payload); err != nil {
		log.Fatalf("send: %v", err)
	}
	var dialled, accepted []*recordedConn
	waitFor("both streams", func() bool {
		dialled, _ = rd.conns()
		_, accepted = rl.conns()
		return len(dialled) >= 2 && len(accepted) >= 2
	})
	c := vectorCase{Name: name, Compression: compression, ListenerName: "go-listener", DialerName: "go-dialer",
		JoinDialer: hex.EncodeToString(dialled[0].bytes()), JoinReply: hex.EncodeToString(accepted[0].bytes()),
		UserDialer: hex.EncodeToString(dialled[1].bytes()), UserPayload: string(payload)}
	if key != nil {
		c.Key = hex.EncodeToString(key)
	}
	return c
}

func runVectors(args []string) {
	fs := flag.NewFlagSet("vectors", flag.ExitOnError)
	label := fs.String("label", "dc1", "memberlist label")
	fs.Parse(args)
	key := []byte("0123456789abcdef")
	cases := []vectorCase{
		oneCase("plain", *label, false, nil),
		oneCase("compressed", *label, true, nil),
		oneCase("encrypted", *label, true, key),
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(map[string]interface{}{"label": *label, "cases": cases}); err != nil {
		log.Fatal(err)
	}
}
