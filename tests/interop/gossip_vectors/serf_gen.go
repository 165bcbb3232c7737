// Test vectors for mcastmember.gossip.serf, produced by Serf's own code.
//
// This file is compiled INSIDE a copy of Serf's serf package (see
// serf_gen.sh), so that it calls the unexported functions Serf itself uses:
// encodeTags/decodeTags, encodeMessage, encodeRelayMessage, encodeFilter,
// QueryParam.encodeFilters, delegate.LocalState/MergeRemoteState,
// handleNodeJoinIntent/handleNodeLeaveIntent/handleNodeJoin/handleNodeLeave,
// handleUserEvent, handleQuery and the LamportClock. Nothing here
// re-implements Serf: every byte and every decision in serf_vectors.json comes
// out of serf 0.9.4 (Debian's golang-github-hashicorp-serf-dev).
//
// Go writes maps in random order: vectors whose bytes hold a map of more than
// one entry are marked "exact": false (decode them, do not compare bytes).
package serf

import (
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"log"
	"net"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
)

var serfVectorsOut = flag.String("out", "serf_vectors.json", "where to write the vectors")

type tagVector struct {
	Name     string            `json:"name"`
	Protocol uint8             `json:"protocol"`
	Tags     map[string]string `json:"tags"`
	Wire     string            `json:"wire"`
	Exact    bool              `json:"exact"`
}

type tagDecodeVector struct {
	Name string            `json:"name"`
	Meta string            `json:"meta"` // hex, given to decodeTags
	Tags map[string]string `json:"tags"` // what Go decoded
}

type msgVector struct {
	Name   string      `json:"name"`
	Type   string      `json:"type"`
	Fields interface{} `json:"fields"` // the Go value as encoding/json writes it
	Wire   string      `json:"wire"`
	Exact  bool        `json:"exact"`
}

type clockStep struct {
	Op     string `json:"op"` // increment, witness
	Value  uint64 `json:"value"`
	Result uint64 `json:"result"` // Increment's return value
	Time   uint64 `json:"time"`   // Time() after the step
}

type eventStep struct {
	LTime       uint64 `json:"ltime"`
	Name        string `json:"name"`
	Payload     string `json:"payload"` // hex
	ID          uint32 `json:"id"`      // queries only
	Rebroadcast bool   `json:"rebroadcast"`
	Clock       uint64 `json:"clock"`
	Delivered   bool   `json:"delivered"`
}

type bufferVector struct {
	Name    string      `json:"name"`
	Kind    string      `json:"kind"` // event, query
	Size    int         `json:"size"`
	MinTime uint64      `json:"min_time"`
	Steps   []eventStep `json:"steps"`
}

type memberView struct {
	Status string `json:"status"`
	LTime  uint64 `json:"ltime"`
}

type intentStep struct {
	Op      string                `json:"op"` // join_intent, leave_intent, node_join, node_leave, merge
	Node    string                `json:"node"`
	LTime   uint64                `json:"ltime"`
	State   string                `json:"state,omitempty"` // merge: hex of the push/pull message
	Join    bool                  `json:"join,omitempty"`
	Result  bool                  `json:"result"`
	Clock   uint64                `json:"clock"`
	Members map[string]memberView `json:"members"`
	Intents map[string]memberView `json:"intents"` // node -> (intent type as status, ltime)
	Events  []string              `json:"events"`  // what Serf put on its event channel
	Left    []string              `json:"left"`
	Failed  []string              `json:"failed"`
}

type intentVector struct {
	Name  string       `json:"name"`
	Self  string       `json:"self"`
	Steps []intentStep `json:"steps"`
}

type serfVectors struct {
	Source     string            `json:"source"`
	Tags       []tagVector       `json:"tags"`
	TagDecodes []tagDecodeVector `json:"tag_decodes"`
	Messages   []msgVector       `json:"messages"`
	Clock      []clockStep       `json:"clock"`
	Buffers    []bufferVector    `json:"buffers"`
	Intents    []intentVector    `json:"intents"`
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func h(b []byte) string { return hex.EncodeToString(b) }

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	must(err)
	return b
}

func fill(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// vectorEvents keeps the receiving end of each Serf's event channel.
var vectorEvents = map[*Config]chan Event{}

func vectorSerf(protocol uint8, self string) *Serf {
	conf := DefaultConfig()
	conf.NodeName = self
	conf.ProtocolVersion = protocol
	conf.Init()
	events := make(chan Event, 1024)
	conf.EventCh = events
	vectorEvents[conf] = events
	s := &Serf{
		config:        conf,
		members:       map[string]*memberState{},
		recentIntents: map[string]nodeIntent{},
		eventBuffer:   make([]*userEvents, conf.EventBuffer),
		queryBuffer:   make([]*queries, conf.QueryBuffer),
		queryResponse: map[LamportTime]*QueryResponse{},
		logger:        log.New(io.Discard, "", 0),
		state:         SerfAlive,
	}
	s.eventJoinIgnore.Store(false)
	client, err := coordinate.NewClient(coordinate.DefaultConfig())
	must(err)
	s.coordClient = client
	s.coordCache = map[string]*coordinate.Coordinate{}
	return s
}

// drain lists what Serf put on its event channel since the last drain.
func drain(s *Serf) []string {
	out := []string{}
	for {
		select {
		case e := <-vectorEvents[s.config]:
			switch ev := e.(type) {
			case MemberEvent:
				for _, m := range ev.Members {
					out = append(out, ev.Type.String()+":"+m.Name)
				}
			case UserEvent:
				out = append(out, "user:"+ev.Name+":"+h(ev.Payload))
			default:
				out = append(out, e.String())
			}
		default:
			return out
		}
	}
}

func names(ms []*memberState) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Name)
	}
	sort.Strings(out)
	return out
}

func view(s *Serf) (map[string]memberView, map[string]memberView) {
	members := map[string]memberView{}
	for name, m := range s.members {
		members[name] = memberView{m.Status.String(), uint64(m.statusLTime)}
	}
	intents := map[string]memberView{}
	for name, i := range s.recentIntents {
		kind := "join"
		if i.Type == messageLeaveType {
			kind = "leave"
		}
		intents[name] = memberView{kind, uint64(i.LTime)}
	}
	return members, intents
}

func TestSerfVectors(t *testing.T) {
	v := serfVectors{Source: "hashicorp/serf 0.9.4 (Debian golang-github-hashicorp-serf-dev), memberlist 0.2.2, go-msgpack 0.5.x"}

	// ---------------------------------------------------------------- tags
	tag := func(name string, protocol uint8, tags map[string]string) {
		s := vectorSerf(protocol, "py-1")
		v.Tags = append(v.Tags, tagVector{name, protocol, tags, h(s.encodeTags(tags)), len(tags) <= 1 || protocol < 3})
	}
	tag("tags-empty", 5, map[string]string{})
	tag("tags-nil", 5, nil)
	tag("tags-one", 5, map[string]string{"role": "web"})
	tag("tags-one-long-value", 5, map[string]string{"path": strings.Repeat("v", 40)})
	tag("tags-one-empty-value", 4, map[string]string{"x": ""})
	tag("tags-three", 5, map[string]string{"role": "web", "dc": "east", "rack": "r1"})
	tag("tags-many", 5, map[string]string{"a": "1", "b": "22", "c": "333", "d": "4444", "e": "55555", "f": "", "g": "ü"})
	tag("tags-role-protocol-2", 2, map[string]string{"role": "db", "dc": "east"})

	tagDecode := func(name string, meta []byte) {
		s := vectorSerf(5, "py-1")
		v.TagDecodes = append(v.TagDecodes, tagDecodeVector{name, h(meta), s.decodeTags(meta)})
	}
	tagDecode("decode-empty-meta", nil)
	tagDecode("decode-role-only", []byte("web"))
	tagDecode("decode-magic-empty-map", []byte{0xff, 0x80})
	tagDecode("decode-magic-nil", []byte{0xff, 0xc0})
	// Sorted keys (as mcastmember writes them) and reversed keys: Go reads both.
	tagDecode("decode-sorted", unhex("ff83a26463a465617374a47261636ba27231a4726f6c65a3776562"))
	tagDecode("decode-reversed", unhex("ff83a4726f6c65a3776562a47261636ba27231a26463a465617374"))

	// ------------------------------------------------------------ messages
	add := func(name, typ string, t messageType, msg interface{}, exact bool) {
		raw, err := encodeMessage(t, msg)
		must(err)
		v.Messages = append(v.Messages, msgVector{name, typ, msg, h(raw), exact})
	}
	ip4 := []byte(net.IPv4(10, 0, 0, 7).To4())
	ip6 := []byte(net.ParseIP("fd00::1"))
	add("join", "join", messageJoinType, &messageJoin{LTime: 7, Node: "py-1"}, true)
	add("join-zero", "join", messageJoinType, &messageJoin{}, true)
	add("join-big-ltime", "join", messageJoinType, &messageJoin{LTime: 1<<64 - 1, Node: strings.Repeat("n", 40)}, true)
	add("leave", "leave", messageLeaveType, &messageLeave{LTime: 300, Node: "serf-1"}, true)
	add("leave-prune", "leave", messageLeaveType, &messageLeave{LTime: 70000, Node: "serf-2", Prune: true}, true)
	add("user-event", "user_event", messageUserEventType, &messageUserEvent{LTime: 3, Name: "deploy", Payload: []byte("v1.2"), CC: true}, true)
	add("user-event-no-payload", "user_event", messageUserEventType, &messageUserEvent{LTime: 0, Name: "ping"}, true)
	add("user-event-binary", "user_event", messageUserEventType, &messageUserEvent{LTime: 1 << 33, Name: "bin", Payload: fill(300, 1)}, true)

	params := &QueryParam{FilterNodes: []string{"serf-1", "py-1"}, FilterTags: map[string]string{"role": "^web$"}, RequestAck: true, RelayFactor: 2}
	filters, err := params.encodeFilters()
	must(err)
	add("query", "query", messageQueryType, &messageQuery{LTime: 12, ID: 0x7fffffff, Addr: ip4, Port: 7946, SourceNode: "serf-1",
		Filters: filters, Flags: queryFlagAck, RelayFactor: 2, Timeout: 16 * 200 * time.Millisecond, Name: "uptime", Payload: []byte("?")}, true)
	add("query-minimal", "query", messageQueryType, &messageQuery{LTime: 1, ID: 5, Addr: ip6, Port: 7946, SourceNode: "py-1",
		Timeout: time.Second, Name: "q"}, true)
	add("query-no-broadcast", "query", messageQueryType, &messageQuery{LTime: 2, ID: 6, Addr: ip4, Port: 1, SourceNode: "a",
		Flags: queryFlagAck | queryFlagNoBroadcast, Timeout: 0, Name: "_serf_ping"}, true)
	add("query-response", "query_response", messageQueryResponseType, &messageQueryResponse{LTime: 12, ID: 0x7fffffff, From: "py-1", Payload: []byte("up 3 days")}, true)
	add("query-response-ack", "query_response", messageQueryResponseType, &messageQueryResponse{LTime: 12, ID: 9, From: "py-1", Flags: queryFlagAck}, true)

	nodeFilter, err := encodeFilter(filterNodeType, filterNode{"serf-1", "py-1"})
	must(err)
	tagFilter, err := encodeFilter(filterTagType, &filterTag{Tag: "role", Expr: "^web$"})
	must(err)
	v.Messages = append(v.Messages, msgVector{"filter-node", "filter_node", []string{"serf-1", "py-1"}, h(nodeFilter), true})
	v.Messages = append(v.Messages, msgVector{"filter-tag", "filter_tag", &filterTag{Tag: "role", Expr: "^web$"}, h(tagFilter), true})

	// Key management: a request's payload and the responses (internal_query.go, keymanager.go).
	key := fill(32, 0x30)
	add("key-request", "key_request", messageKeyRequestType, &keyRequest{Key: key}, true)
	add("key-request-empty", "key_request", messageKeyRequestType, &keyRequest{}, true)
	add("key-response-ok", "key_response", messageKeyResponseType, &nodeKeyResponse{Result: true}, true)
	add("key-response-error", "key_response", messageKeyResponseType, &nodeKeyResponse{Message: "No keyring to modify (encryption not enabled)"}, true)
	add("key-response-list", "key_response", messageKeyResponseType, &nodeKeyResponse{Result: true,
		Keys: []string{"MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7Ago=", "EBceJSwzOkFIT1ZdZGtyeQ=="}, PrimaryKey: "MDc+RUxTWmFob3Z9hIuSmaCnrrW8w8rR2N/m7fT7Ago="}, true)

	// A key-list response as Serf's list-keys handler sizes it (keyListResponseWithCorrectSize).
	{
		s := vectorSerf(5, "py-1")
		q := &Query{LTime: 4, Name: internalQueryName(listKeysQuery), serf: s, id: 77}
		resp := &nodeKeyResponse{Result: true, PrimaryKey: "EBceJSwzOkFIT1ZdZGtyeQ=="}
		for i := 0; i < 60; i++ {
			resp.Keys = append(resp.Keys, "EBceJSwzOkFIT1ZdZGtyeQ==")
		}
		sq := &serfQueries{serf: s, logger: s.logger}
		raw, qresp, err := sq.keyListResponseWithCorrectSize(q, resp)
		must(err)
		v.Messages = append(v.Messages, msgVector{"query-response-key-list-truncated", "query_response", &qresp, h(raw), true})
	}

	// Relayed responses (messages.go encodeRelayMessage, as query.go relayResponse calls it).
	relay := func(name string, ip []byte, port int, node string, resp *messageQueryResponse) {
		raw, err := encodeRelayMessage(messageQueryResponseType, net.UDPAddr{IP: ip, Port: port}, node, &resp)
		must(err)
		v.Messages = append(v.Messages, msgVector{name, "relay", map[string]interface{}{
			"DestAddr": net.UDPAddr{IP: ip, Port: port}, "DestName": node, "Message": resp}, h(raw), true})
	}
	relay("relay-ipv4", ip4, 7946, "serf-1", &messageQueryResponse{LTime: 12, ID: 9, From: "py-1", Flags: queryFlagAck})
	relay("relay-ipv6", ip6, 8000, "py-1", &messageQueryResponse{LTime: 1, ID: 2, From: "serf-2", Payload: []byte("x")})

	// Conflict query answer (internal_query.go handleConflict): a Member, or nil.
	add("conflict-response", "conflict_response", messageConflictResponseType, &Member{Name: "py-1", Addr: net.IP(ip4), Port: 7946,
		Tags: map[string]string{"role": "web"}, Status: StatusAlive, ProtocolMin: 1, ProtocolMax: 5, ProtocolCur: 2,
		DelegateMin: 2, DelegateMax: 5, DelegateCur: 4}, true)
	add("conflict-response-unknown", "conflict_response", messageConflictResponseType, (*Member)(nil), true)

	// Push/pull user state, from delegate.LocalState itself.
	localState := func(name string, members map[string]LamportTime, left []string, events []*userEvents, clocks [3]LamportTime) {
		s := vectorSerf(5, "py-1")
		for n, lt := range members {
			s.members[n] = &memberState{Member: Member{Name: n, Status: StatusAlive}, statusLTime: lt}
		}
		for _, n := range left {
			m := s.members[n]
			m.Status = StatusLeft
			s.leftMembers = append(s.leftMembers, m)
		}
		s.eventBuffer = events
		s.clock.Witness(clocks[0])
		s.eventClock.Witness(clocks[1])
		s.queryClock.Witness(clocks[2])
		raw := (&delegate{serf: s}).LocalState(false)
		var pp messagePushPull
		must(decodeMessage(raw[1:], &pp))
		v.Messages = append(v.Messages, msgVector{name, "push_pull", &pp, h(raw), len(members) <= 1})
	}
	localState("push-pull-alone", map[string]LamportTime{"py-1": 1}, nil, make([]*userEvents, 4), [3]LamportTime{1, 0, 0})
	localState("push-pull-events", map[string]LamportTime{"serf-1": 9}, []string{"serf-1"}, []*userEvents{
		nil, {LTime: 5, Events: []userEvent{{Name: "deploy", Payload: []byte("v1")}, {Name: "deploy", Payload: []byte("v2")}}},
		{LTime: 6, Events: []userEvent{{Name: "empty"}}}, nil}, [3]LamportTime{10, 6, 3})
	localState("push-pull-three", map[string]LamportTime{"serf-1": 9, "serf-2": 4, "py-1": 12}, []string{"serf-2"},
		make([]*userEvents, 512), [3]LamportTime{12, 0, 700})

	// Serf's ping-ack payload (ping_delegate.go AckPayload): version 1 + a coordinate.
	{
		s := vectorSerf(5, "py-1")
		raw := (&pingDelegate{serf: s}).AckPayload()
		v.Messages = append(v.Messages, msgVector{"ack-payload-coordinate", "coordinate", s.coordClient.GetCoordinate(), h(raw), true})
	}

	// --------------------------------------------------------- Lamport clock
	var clock LamportClock
	step := func(op string, value uint64) {
		var result uint64
		if op == "increment" {
			result = uint64(clock.Increment())
		} else {
			clock.Witness(LamportTime(value))
		}
		v.Clock = append(v.Clock, clockStep{op, value, result, uint64(clock.Time())})
	}
	step("increment", 0)
	step("increment", 0)
	step("witness", 1)  // older: unchanged
	step("witness", 2)  // equal: one past it
	step("witness", 10) // newer: one past it
	step("increment", 0)
	step("witness", 5)
	step("witness", 1<<64-2)
	step("witness", 1<<64-1) // Go's uint64 wraps: one past the largest is 0

	// ------------------------------------------------- event and query buffers
	eventScript := func(name string, size int, minTime LamportTime, steps []eventStep) {
		s := vectorSerf(5, "py-1")
		s.eventBuffer = make([]*userEvents, size)
		s.eventMinTime = minTime
		for i := range steps {
			st := &steps[i]
			msg := messageUserEvent{LTime: LamportTime(st.LTime), Name: st.Name, Payload: unhex(st.Payload)}
			st.Rebroadcast = s.handleUserEvent(&msg)
			st.Clock = uint64(s.eventClock.Time())
			st.Delivered = len(drain(s)) > 0
		}
		v.Buffers = append(v.Buffers, bufferVector{name, "event", size, uint64(minTime), steps})
	}
	eventScript("events-dedupe", 4, 0, []eventStep{
		{LTime: 0, Name: "a", Payload: "01"},
		{LTime: 0, Name: "a", Payload: "01"}, // same event: dropped
		{LTime: 0, Name: "a", Payload: "02"}, // same time, other payload: new
		{LTime: 0, Name: "b", Payload: "01"},
		{LTime: 1, Name: "a", Payload: "01"}, // same event, other time: new
		{LTime: 4, Name: "a", Payload: "01"}, // same slot as 0, replaces it
		{LTime: 0, Name: "a", Payload: "01"}, // too old now (clock 5, buffer 4)
		{LTime: 2, Name: "c", Payload: ""},
		{LTime: 1, Name: "a", Payload: "01"}, // still in the buffer: dropped
		{LTime: 100, Name: "far", Payload: ""},
		{LTime: 96, Name: "x", Payload: ""},  // too old: 96 < 101 - 4
		{LTime: 97, Name: "x", Payload: ""},  // 97 == 101 - 4: accepted
		{LTime: 97, Name: "x", Payload: ""},  // duplicate
		{LTime: 101, Name: "y", Payload: ""}, // slot of 97: replaces it
		{LTime: 97, Name: "x", Payload: ""},  // gone from the buffer, 97 < 102-4: old
	})
	eventScript("events-min-time", 8, 5, []eventStep{
		{LTime: 4, Name: "before", Payload: ""}, // before the minimum (a join that ignores old events)
		{LTime: 5, Name: "at", Payload: ""},
		{LTime: 3, Name: "before", Payload: "00"},
	})
	queryScript := func(name string, size int, minTime LamportTime, steps []eventStep) {
		s := vectorSerf(5, "py-1")
		s.queryBuffer = make([]*queries, size)
		s.queryMinTime = minTime
		for i := range steps {
			st := &steps[i]
			q := messageQuery{LTime: LamportTime(st.LTime), ID: st.ID, Name: st.Name, Timeout: time.Second}
			if st.Payload == "nb" {
				q.Flags = queryFlagNoBroadcast
			}
			st.Rebroadcast = s.handleQuery(&q)
			st.Clock = uint64(s.queryClock.Time())
			st.Delivered = len(drain(s)) > 0
		}
		v.Buffers = append(v.Buffers, bufferVector{name, "query", size, uint64(minTime), steps})
	}
	queryScript("queries-dedupe", 4, 2, []eventStep{
		{LTime: 1, ID: 1, Name: "q"}, // before the minimum
		{LTime: 2, ID: 1, Name: "q"},
		{LTime: 2, ID: 1, Name: "q"}, // same ID: dropped
		{LTime: 2, ID: 2, Name: "q"},
		{LTime: 3, ID: 3, Name: "q", Payload: "nb"}, // no rebroadcast flag: delivered, not rebroadcast
		{LTime: 6, ID: 1, Name: "q"},                // slot of 2
		{LTime: 2, ID: 1, Name: "q"},                // 2 < 7 - 4: old
		{LTime: 3, ID: 3, Name: "q"},                // 3 == 7 - 4, still buffered: dropped
	})

	// ---------------------------------------------------- intents and members
	intentScript := func(name string, self string, steps []intentStep) {
		s := vectorSerf(5, self)
		for i := range steps {
			st := &steps[i]
			switch st.Op {
			case "join_intent":
				st.Result = s.handleNodeJoinIntent(&messageJoin{LTime: LamportTime(st.LTime), Node: st.Node})
			case "leave_intent":
				st.Result = s.handleNodeLeaveIntent(&messageLeave{LTime: LamportTime(st.LTime), Node: st.Node})
			case "node_join":
				s.handleNodeJoin(&memberlist.Node{Name: st.Node, Addr: net.IP(ip4), Port: 7946, Meta: []byte{0xff, 0x80}})
			case "node_leave":
				s.handleNodeLeave(&memberlist.Node{Name: st.Node})
			case "merge":
				(&delegate{serf: s}).MergeRemoteState(unhex(st.State), st.Join)
			case "local_leave":
				// Serf.Leave's first half: the intent at the current time, then the increment.
				msg := messageLeave{LTime: s.clock.Time(), Node: self}
				s.clock.Increment()
				s.state = SerfLeaving
				st.LTime = uint64(msg.LTime)
				st.Result = s.handleNodeLeaveIntent(&msg)
			}
			st.Clock = uint64(s.clock.Time())
			st.Members, st.Intents = view(s)
			st.Events = drain(s)
			st.Left = names(s.leftMembers)
			st.Failed = names(s.failedMembers)
		}
		v.Intents = append(v.Intents, intentVector{name, self, steps})
	}
	intentScript("intents-before-members", "py-1", []intentStep{
		{Op: "join_intent", Node: "serf-1", LTime: 5},  // unknown node: buffered, rebroadcast
		{Op: "join_intent", Node: "serf-1", LTime: 5},  // same time: not new
		{Op: "join_intent", Node: "serf-1", LTime: 3},  // older: not new
		{Op: "leave_intent", Node: "serf-1", LTime: 6}, // newer leave replaces the join
		{Op: "join_intent", Node: "serf-2", LTime: 2},
		{Op: "node_join", Node: "serf-1"}, // joins as leaving at 6
		{Op: "node_join", Node: "serf-2"}, // joins alive at 2
		{Op: "node_join", Node: "serf-3"}, // no intent: alive at 0
	})
	intentScript("intents-on-members", "py-1", []intentStep{
		{Op: "node_join", Node: "serf-1"},
		{Op: "node_join", Node: "serf-2"},
		{Op: "join_intent", Node: "serf-1", LTime: 4},
		{Op: "join_intent", Node: "serf-1", LTime: 4},  // not newer
		{Op: "leave_intent", Node: "serf-1", LTime: 4}, // not newer than the join
		{Op: "leave_intent", Node: "serf-1", LTime: 9}, // alive -> leaving
		{Op: "leave_intent", Node: "serf-1", LTime: 9}, // same: dropped
		{Op: "leave_intent", Node: "serf-1", LTime: 10}, // leaving: time updated, rebroadcast
		{Op: "join_intent", Node: "serf-1", LTime: 11},  // leaving -> alive again
		{Op: "leave_intent", Node: "serf-1", LTime: 12},
		{Op: "node_leave", Node: "serf-1"}, // leaving -> left
		{Op: "node_leave", Node: "serf-2"}, // alive -> failed
		{Op: "leave_intent", Node: "serf-2", LTime: 13}, // failed -> left (forced leave)
		{Op: "node_join", Node: "serf-1"},               // back: alive, off the left list
		{Op: "node_leave", Node: "nobody"},
		{Op: "leave_intent", Node: "serf-2", LTime: 14}, // left: time updated, rebroadcast
	})
	intentScript("local-leave", "py-1", []intentStep{
		{Op: "node_join", Node: "py-1"},
		{Op: "join_intent", Node: "py-1", LTime: 3},
		{Op: "local_leave", Node: "py-1"},
		{Op: "node_leave", Node: "py-1"},
	})

	// Push/pull merges (delegate.MergeRemoteState), with user states Serf wrote.
	ppState := func(pp *messagePushPull) string {
		raw, err := encodeMessage(messagePushPullType, pp)
		must(err)
		return h(raw)
	}
	intentScript("merge", "py-1", []intentStep{
		{Op: "node_join", Node: "py-1"},
		{Op: "node_join", Node: "serf-1"},
		{Op: "node_join", Node: "serf-2"},
		{Op: "merge", State: ppState(&messagePushPull{LTime: 20, StatusLTimes: map[string]LamportTime{"serf-1": 7},
			LeftMembers: []string{}, EventLTime: 3, Events: []*userEvents{nil, {LTime: 2, Events: []userEvent{{Name: "deploy", Payload: []byte("v1")}}}},
			QueryLTime: 9})},
		{Op: "merge", State: ppState(&messagePushPull{LTime: 21, StatusLTimes: map[string]LamportTime{"serf-2": 8},
			LeftMembers: []string{"serf-2"}, EventLTime: 3, Events: []*userEvents{{LTime: 2, Events: []userEvent{{Name: "deploy", Payload: []byte("v1")}}}}})},
		{Op: "merge", State: ppState(&messagePushPull{LTime: 0, StatusLTimes: map[string]LamportTime{"serf-9": 30}, LeftMembers: []string{}}), Join: true},
		{Op: "merge", State: ppState(&messagePushPull{LTime: 0, StatusLTimes: map[string]LamportTime{"serf-8": 31}, LeftMembers: []string{"serf-8"}})},
		{Op: "node_join", Node: "serf-9"},
		{Op: "node_join", Node: "serf-8"},
	})

	f, err := os.Create(*serfVectorsOut)
	must(err)
	defer f.Close()
	enc := json.NewEncoder(f)
	enc.SetIndent("", " ")
	must(enc.Encode(&v))
}
