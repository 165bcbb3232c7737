// Test vectors for mcastmember.gossip.serf.coordinates, produced by Serf's own code.
//
// Compiled INSIDE a copy of Serf's serf package, as serf_gen.go is (see
// serf_gen.sh: `serf_gen.sh coord`), so that it drives Serf's unexported ping
// delegate: every ack payload below is pingDelegate.AckPayload's, and every
// update goes through pingDelegate.NotifyPingComplete (decode, sanity checks,
// coordinate.Client.Update, the coordinate cache) with Serf's default
// coordinate config. Nothing here re-implements Serf.
//
// The others' coordinates never sit where ours is (Vivaldi then picks a
// random direction, which no vector can pin down).
package serf

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"log"
	"math"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/codec"
	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
)

var coordVectorsOut = flag.String("out", "coord_vectors.json", "where to write the vectors")

type coordStep struct {
	Node     string                 `json:"node"`
	RTTNs    int64                  `json:"rtt_ns"`
	Payload  string                 `json:"payload"`  // hex: the other's ack payload
	Accepted bool                   `json:"accepted"` // Serf cached the other's coordinate
	After    *coordinate.Coordinate `json:"after"`    // our coordinate after the step
	Ack      string                 `json:"ack"`      // hex: our AckPayload after the step
	Resets   int                    `json:"resets"`
}

type distanceVector struct {
	A       *coordinate.Coordinate `json:"a"`
	B       *coordinate.Coordinate `json:"b"`
	Nanos   int64                  `json:"nanos"` // a.DistanceTo(b), what `serf rtt` prints
}

type coordVectors struct {
	Source    string              `json:"source"`
	Config    *coordinate.Config  `json:"config"`
	Fresh     string              `json:"fresh"` // a new node's AckPayload
	Steps     []coordStep         `json:"steps"`
	Distances []distanceVector    `json:"distances"`
}

func coordSerf(name string) *Serf {
	client, err := coordinate.NewClient(coordinate.DefaultConfig())
	if err != nil {
		panic(err)
	}
	conf := DefaultConfig()
	conf.NodeName = name
	s := &Serf{config: conf, logger: log.New(io.Discard, "", 0), coordClient: client,
		coordCache: map[string]*coordinate.Coordinate{}}
	s.coordCache[name] = client.GetCoordinate()
	return s
}

// peerPayload: what a peer at ``c`` puts in its acks (its own AckPayload).
func peerPayload(c *coordinate.Coordinate) []byte {
	peer := coordSerf("peer")
	if err := peer.coordClient.SetCoordinate(c); err != nil {
		panic(err)
	}
	return (&pingDelegate{serf: peer}).AckPayload()
}

// rawPayload: a payload no sane Serf would send (version byte + msgpack of c).
func rawPayload(version byte, c *coordinate.Coordinate) []byte {
	buf := bytes.NewBuffer([]byte{version})
	if err := codec.NewEncoder(buf, &codec.MsgpackHandle{}).Encode(c); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

func coord(err, adj, height float64, vec ...float64) *coordinate.Coordinate {
	return &coordinate.Coordinate{Vec: vec, Error: err, Adjustment: adj, Height: height}
}

func TestCoordVectors(t *testing.T) {
	v := coordVectors{Source: "hashicorp/serf 0.9.4 (Debian golang-github-hashicorp-serf-dev): ping_delegate.go, coordinate/",
		Config: coordinate.DefaultConfig()}
	me := coordSerf("py-1")
	v.Fresh = hex.EncodeToString((&pingDelegate{serf: me}).AckPayload())

	step := func(node string, rtt time.Duration, payload []byte) {
		delete(me.coordCache, node)
		(&pingDelegate{serf: me}).NotifyPingComplete(&memberlist.Node{Name: node}, rtt, payload)
		_, accepted := me.coordCache[node]
		v.Steps = append(v.Steps, coordStep{node, int64(rtt), hex.EncodeToString(payload), accepted,
			me.coordClient.GetCoordinate(), hex.EncodeToString((&pingDelegate{serf: me}).AckPayload()),
			me.coordClient.Stats().Resets})
	}
	a := coord(0.9, 0.0004, 0.00012, 0.003, -0.001, 0.0005, 0, 0.002, 0, -0.0007, 0.0001)
	b := coord(0.4, -0.0002, 0.00002, -0.004, 0.002, 0, 0.001, -0.0015, 0.0008, 0, 0.0003)
	c := coord(1.5, 0, 0.00001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001, 0.0001)
	ms := time.Millisecond
	us := time.Microsecond
	rtts := []time.Duration{2*ms + 137*us, 850 * us, 4*ms + 3*us, 1*ms + 999*us, 12 * ms, 3 * ms, 640 * us,
		2*ms + 500*us, 5 * ms, 1200 * us}
	peers := []struct {
		name string
		c    *coordinate.Coordinate
	}{{"serf-a", a}, {"serf-b", b}, {"serf-c", c}}
	// 30 updates: the latency filter (3 per node) and the adjustment window
	// (20) both fill and roll over.
	for i := 0; i < 30; i++ {
		p := peers[i%3]
		step(p.name, rtts[(i*7)%len(rtts)], peerPayload(p.c))
	}
	// What Serf refuses (silently: an error log or the rejected counter),
	// leaving our coordinate as it was.
	step("serf-a", 0, nil)                                                   // no payload
	step("serf-a", 2*ms, []byte{})                                           // empty
	step("serf-a", 2*ms, rawPayload(2, a))                                   // unknown version
	step("serf-a", 2*ms, peerPayload(a)[:20])                                // truncated
	step("serf-a", 2*ms, rawPayload(1, coord(0.5, 0, 0.00001, 0.001, 0.002))) // 2 dimensions, not 8
	step("serf-a", 2*ms, rawPayload(1, coord(0.5, 0, 0.00001, 0.001, math.NaN(), 0, 0, 0, 0, 0, 0)))
	step("serf-a", 2*ms, rawPayload(1, coord(math.Inf(1), 0, 0.00001, 0.001, 0, 0, 0, 0, 0, 0, 0)))
	step("serf-a", -1*ms, peerPayload(a))                                    // negative RTT
	step("serf-a", 10*time.Second+1, peerPayload(a))                         // over 10 s
	// At the edges: the longest RTT Serf takes, and a zero one (taken as 1 us).
	step("serf-b", 10*time.Second, peerPayload(b))
	step("serf-c", 0, peerPayload(c))
	// A coordinate far away: ours goes invalid, and Serf starts it again.
	step("serf-far", 3*ms, rawPayload(1, coord(0.5, 0, 0.00001, 1e300, 1e300, 0, 0, 0, 0, 0, 0)))
	for i := 0; i < 4; i++ {
		p := peers[i%3]
		step(p.name, rtts[i], peerPayload(p.c))
	}

	dist := func(x, y *coordinate.Coordinate) {
		v.Distances = append(v.Distances, distanceVector{x, y, int64(x.DistanceTo(y))})
	}
	dist(a, b)
	dist(b, c)
	dist(a, a)
	dist(coord(0.2, -0.01, 0.00001, 0.001), coord(0.2, -0.01, 0.00001, 0.002)) // adjusted below 0: raw distance
	dist(me.coordClient.GetCoordinate(), a)

	f, err := os.Create(*coordVectorsOut)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", " ")
	if err := enc.Encode(&v); err != nil {
		panic(err)
	}
}
