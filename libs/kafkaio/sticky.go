package kafkaio

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/segmentio/kafka-go"
)

// StickyProtocol is the group protocol name of StickyBalancer.
const StickyProtocol = "trawl-sticky-v1"

// StickyBalancer is a kafka-go GroupBalancer that is balanced (the partition
// counts of a topic's members differ by at most one) and sticky (a member
// keeps the partitions it owned, as far as balance allows). It is the
// second level of the pipeline's two-level hash: URL → partition (virtual
// node) → live member. When a member joins, only the newcomer's share moves
// (at most ceil(P/(n+1)) partitions); when one leaves, only its partitions
// move.
//
// Every member reports, in its JoinGroup user data, the partitions it was
// assigned in the last generation it joined (SetOwned) and that generation's
// id; the leader keeps each member's claims up to its balanced quota and
// hands out the rest. When two members claim one partition (a member that
// was fenced out rejoins with a stale claim) the newer generation wins.
//
// One StickyBalancer belongs to one consumer group member: Group creates one
// per Run unless GroupConfig.Balancers is set. Safe for concurrent use.
type StickyBalancer struct {
	mu    sync.Mutex
	gen   int32
	owned map[string][]int
}

// NewStickyBalancer returns a balancer whose member owns nothing yet.
func NewStickyBalancer() *StickyBalancer {
	return &StickyBalancer{owned: make(map[string][]int)}
}

// ProtocolName implements kafka.GroupBalancer.
func (b *StickyBalancer) ProtocolName() string { return StickyProtocol }

// SetOwned records the partitions of topic assigned to this member in
// generation gen; the next UserData reports them. Group calls it for every
// generation it joins.
func (b *StickyBalancer) SetOwned(gen int32, topic string, partitions []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen = gen
	b.owned[topic] = slices.Clone(partitions)
}

// UserData implements kafka.GroupBalancer: the encoded claims of this member.
func (b *StickyBalancer) UserData() ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return encodeClaims(b.gen, b.owned), nil
}

// AssignGroups implements kafka.GroupBalancer. It runs on the group leader.
// Members whose user data cannot be decoded claim nothing.
func (b *StickyBalancer) AssignGroups(members []kafka.GroupMember, partitions []kafka.Partition) kafka.GroupMemberAssignments {
	out := make(kafka.GroupMemberAssignments, len(members))
	byTopic := make(map[string][]int)
	for _, p := range partitions {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.ID)
	}
	decoded := make([]struct {
		gen   int32
		owned map[string][]int
	}, len(members))
	for i, m := range members {
		out[m.ID] = make(map[string][]int)
		gen, owned, err := decodeClaims(m.UserData)
		if err == nil {
			decoded[i].gen, decoded[i].owned = gen, owned
		}
	}
	for topic, parts := range byTopic {
		var claims []StickyClaim
		for i, m := range members {
			if !slices.Contains(m.Topics, topic) {
				continue
			}
			claims = append(claims, StickyClaim{Member: m.ID, Generation: decoded[i].gen, Owned: decoded[i].owned[topic]})
		}
		for member, ps := range AssignSticky(claims, parts) {
			out[member][topic] = ps
		}
	}
	return out
}

// StickyClaim is one member's report for one topic: the partitions it owned
// in generation Generation.
type StickyClaim struct {
	Member     string
	Generation int32
	Owned      []int
}

// AssignSticky distributes partitions over the claiming members: every
// member gets floor(P/n) or ceil(P/n) partitions, keeps as many of its
// claimed partitions as that quota allows (the members claiming most get
// the ceil quotas), and the unclaimed or surplus partitions fill the
// members below quota in member order. A partition claimed by several
// members goes to the newest generation (then the smallest member id);
// claims of unknown partitions are ignored. The result has an entry, sorted,
// for every member; it is deterministic for a given input.
func AssignSticky(claims []StickyClaim, partitions []int) map[string][]int {
	out := make(map[string][]int, len(claims))
	if len(claims) == 0 {
		return out
	}
	members := slices.Clone(claims)
	slices.SortFunc(members, func(a, b StickyClaim) int { return cmp.Compare(a.Member, b.Member) })
	members = slices.CompactFunc(members, func(a, b StickyClaim) bool { return a.Member == b.Member })

	parts := slices.Clone(partitions)
	slices.Sort(parts)
	parts = slices.Compact(parts)

	// Resolve each partition to at most one claimant.
	exists := make(map[int]bool, len(parts))
	for _, p := range parts {
		exists[p] = true
	}
	owner := make(map[int]int, len(parts)) // partition → index in members
	for i, m := range members {
		for _, p := range m.Owned {
			if !exists[p] {
				continue
			}
			j, taken := owner[p]
			if !taken || m.Generation > members[j].Generation {
				owner[p] = i // members are sorted: ties keep the smaller id
			}
		}
	}
	kept := make([][]int, len(members))
	for _, p := range parts {
		if i, ok := owner[p]; ok {
			kept[i] = append(kept[i], p)
		}
	}

	// Quotas: the ceil quotas go to the members that hold most.
	n := len(members)
	base, extra := len(parts)/n, len(parts)%n
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(kept[b]), len(kept[a])) })
	quota := make([]int, n)
	for rank, i := range order {
		quota[i] = base
		if rank < extra {
			quota[i]++
		}
	}

	var pool []int
	for i := range members {
		if len(kept[i]) > quota[i] {
			pool = append(pool, kept[i][quota[i]:]...)
			kept[i] = kept[i][:quota[i]]
		}
	}
	for _, p := range parts {
		if _, ok := owner[p]; !ok {
			pool = append(pool, p)
		}
	}
	slices.Sort(pool)
	for i := range members {
		for len(kept[i]) < quota[i] && len(pool) > 0 {
			kept[i] = append(kept[i], pool[0])
			pool = pool[1:]
		}
		slices.Sort(kept[i])
		out[members[i].Member] = kept[i]
	}
	return out
}

// claimsVersion is the first byte of the user data.
const claimsVersion = 1

// encodeClaims encodes: version (1 byte), generation (int32), topic count
// (uint16), then per topic: name length (uint16), name, partition count
// (uint32), partitions (int32 each); big-endian.
func encodeClaims(gen int32, owned map[string][]int) []byte {
	topics := make([]string, 0, len(owned))
	for t := range owned {
		topics = append(topics, t)
	}
	slices.Sort(topics)
	buf := []byte{claimsVersion}
	buf = binary.BigEndian.AppendUint32(buf, uint32(gen))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(topics)))
	for _, t := range topics {
		buf = binary.BigEndian.AppendUint16(buf, uint16(len(t)))
		buf = append(buf, t...)
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(owned[t])))
		for _, p := range owned[t] {
			buf = binary.BigEndian.AppendUint32(buf, uint32(int32(p)))
		}
	}
	return buf
}

var errClaims = errors.New("malformed sticky user data")

// decodeClaims decodes encodeClaims' output. Empty data is no claim. It
// never allocates more than the input's size justifies (the data comes from
// other group members).
func decodeClaims(b []byte) (int32, map[string][]int, error) {
	owned := make(map[string][]int)
	if len(b) == 0 {
		return 0, owned, nil
	}
	if b[0] != claimsVersion {
		return 0, nil, fmt.Errorf("decode claims: version %d: %w", b[0], errClaims)
	}
	b = b[1:]
	if len(b) < 6 {
		return 0, nil, fmt.Errorf("decode claims: header: %w", errClaims)
	}
	gen := int32(binary.BigEndian.Uint32(b))
	nt := int(binary.BigEndian.Uint16(b[4:]))
	b = b[6:]
	for range nt {
		if len(b) < 2 {
			return 0, nil, fmt.Errorf("decode claims: topic: %w", errClaims)
		}
		l := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if len(b) < l+4 {
			return 0, nil, fmt.Errorf("decode claims: topic: %w", errClaims)
		}
		topic := string(b[:l])
		np := int(binary.BigEndian.Uint32(b[l:]))
		b = b[l+4:]
		if np > len(b)/4 {
			return 0, nil, fmt.Errorf("decode claims: partitions: %w", errClaims)
		}
		ps := make([]int, np)
		for i := range ps {
			ps[i] = int(int32(binary.BigEndian.Uint32(b[4*i:])))
		}
		b = b[4*np:]
		owned[topic] = append(owned[topic], ps...)
	}
	if len(b) != 0 {
		return 0, nil, fmt.Errorf("decode claims: %d trailing bytes: %w", len(b), errClaims)
	}
	return gen, owned, nil
}
