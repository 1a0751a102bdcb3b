// The franz-go suite's program: consumer groups driven by franz-go (kgo.ConsumerGroup with its
// default balancer, cooperative-sticky), offsets read back with kadm. franz-go sends every
// request at the highest version both sides advertise, so OffsetCommit and OffsetFetch run at
// the broker's maximum. The scenarios build on one another and run in this order; once one
// fails, the ones that need its state FAIL as not run.
//
//	group-two-consumers         two members of one group share a 3-partition topic (each owns
//	                            at least one partition, together all three), then N keyed
//	                            records are produced; together they receive each exactly once,
//	                            every partition's offsets contiguous from 0, every key in order;
//	                            each commits what it polled (autocommit off), then closes
//	committed-equals-end        kadm FetchOffsets of the group equals ListEndOffsets, partition
//	                            by partition
//	commits-survive-restart     broker-ctl restart (SIGTERM, start); the committed offsets read
//	                            back unchanged
//	resume-after-restart        M more records; a new member of the group starts at the commits
//	                            and gets exactly those M (none from before), commits, closes
//	commits-survive-kill9       broker-ctl kill9 + start; the committed offsets (now the end
//	                            offsets again) read back unchanged
//	resume-after-kill9          as resume-after-restart, after the kill -9
//
// Env: BOOTSTRAP (host:port), BROKER_CTL (scripts/broker-ctl, acting on this suite's broker).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	suite      = "franz-go"
	partitions = 3
	n          = 3000 // records before the first commit
	m          = 600  // records produced before each resume
	keys       = 97
)

var (
	bootstrap = os.Getenv("BOOTSTRAP")
	brokerCtl = os.Getenv("BROKER_CTL")
	failed    = false
)

func note(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "# "+format+"\n", args...)
}

// run reports one scenario: PASS, or FAIL with the error (also when it overruns its time).
func run(name string, timeout time.Duration, f func(ctx context.Context) error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- f(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(timeout + 10*time.Second):
		err = fmt.Errorf("still running %v after its %v budget", time.Since(start).Round(time.Second), timeout)
	}
	if err != nil {
		fmt.Printf("FAIL %s %s: %s\n", suite, name, oneLine(err.Error()))
		failed = true
		return false
	}
	fmt.Printf("PASS %s %s\n", suite, name)
	note("%s: %v", name, time.Since(start).Round(time.Millisecond))
	return true
}

func notRun(name, why string) {
	fmt.Printf("FAIL %s %s: not run (%s failed)\n", suite, name, why)
	failed = true
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 400 {
		s = s[:400] + "..."
	}
	return s
}

func newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("sluice-franz-go-suite"),
		kgo.RetryTimeout(60 * time.Second),
	}, opts...)...)
}

func seqKey(seq int) string   { return fmt.Sprintf("key-%02d", seq%keys) }
func seqValue(seq int) string { return fmt.Sprintf("%07d", seq) }

// produce writes records from..to-1 (key by seq % keys, value = seq), idempotent, acks=all.
func produce(ctx context.Context, topic string, from, to int) error {
	cl, err := newClient()
	if err != nil {
		return err
	}
	defer cl.Close()
	for lo := from; lo < to; lo += 500 {
		var recs []*kgo.Record
		for s := lo; s < min(lo+500, to); s++ {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(seqKey(s)), Value: []byte(seqValue(s))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("produce %d..%d: %w", lo, to, err)
		}
	}
	return nil
}

// member is one group consumer and what it has been assigned and has polled.
type member struct {
	name     string
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	got      []*kgo.Record
	errs     []string
}

func newMember(name, group, topic string) (*member, error) {
	mb := &member{name: name, assigned: map[int32]bool{}}
	track := func(add bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, ps map[string][]int32) {
			mb.mu.Lock()
			defer mb.mu.Unlock()
			for _, p := range ps[topic] {
				if add {
					mb.assigned[p] = true
				} else {
					delete(mb.assigned, p)
				}
			}
		}
	}
	cl, err := newClient(
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(track(true)),
		kgo.OnPartitionsRevoked(track(false)),
		kgo.OnPartitionsLost(track(false)),
	)
	if err != nil {
		return nil, err
	}
	mb.cl = cl
	return mb, nil
}

func (mb *member) partitions() []int32 {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	var ps []int32
	for p := range mb.assigned {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (mb *member) count() int {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	return len(mb.got)
}

// poll keeps polling until stop is closed, collecting records and fetch errors.
func (mb *member) poll(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case <-stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		fs := mb.cl.PollFetches(ctx)
		cancel()
		mb.mu.Lock()
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				mb.errs = append(mb.errs, fmt.Sprintf("%s[%d]: %v", t, p, err))
			}
		})
		fs.EachRecord(func(r *kgo.Record) { mb.got = append(mb.got, r) })
		mb.mu.Unlock()
	}
}

func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// consume polls with every member until they hold want records between them (or ctx ends),
// then polls once more for a short while so that anything extra would be seen too.
func consume(ctx context.Context, members []*member, want int) error {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, mb := range members {
		wg.Add(1)
		go mb.poll(stop, &wg)
	}
	total := func() int {
		t := 0
		for _, mb := range members {
			t += mb.count()
		}
		return t
	}
	err := waitFor(ctx, fmt.Sprintf("%d records", want), func() bool { return total() >= want })
	if err == nil {
		time.Sleep(time.Second)
	}
	close(stop)
	wg.Wait()
	for _, mb := range members {
		if len(mb.errs) > 0 {
			return fmt.Errorf("%s: fetch errors: %s", mb.name, strings.Join(mb.errs, "; "))
		}
	}
	if err != nil {
		return fmt.Errorf("%w (got %d)", err, total())
	}
	return nil
}

// check verifies that the members received records from..to-1 exactly once, each partition's
// offsets contiguous from start[p], and every key's values in production order.
func check(members []*member, from, to int, start map[int32]int64) error {
	seen := map[int]bool{}
	next := map[int32]int64{}
	for p, o := range start {
		next[p] = o
	}
	lastByKey := map[string]int{}
	for _, mb := range members {
		for _, r := range mb.got {
			var seq int
			if _, err := fmt.Sscanf(string(r.Value), "%d", &seq); err != nil {
				return fmt.Errorf("%s: value %q at %d/%d is not ours", mb.name, r.Value, r.Partition, r.Offset)
			}
			if seq < from || seq >= to {
				return fmt.Errorf("%s: record %d (partition %d offset %d) is outside %d..%d",
					mb.name, seq, r.Partition, r.Offset, from, to-1)
			}
			if seen[seq] {
				return fmt.Errorf("record %d received twice", seq)
			}
			seen[seq] = true
			if string(r.Key) != seqKey(seq) {
				return fmt.Errorf("record %d has key %q, want %q", seq, r.Key, seqKey(seq))
			}
			if r.Offset != next[r.Partition] {
				return fmt.Errorf("%s: partition %d: offset %d, expected %d", mb.name, r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			if last, ok := lastByKey[string(r.Key)]; ok && last > seq {
				return fmt.Errorf("key %s: %d after %d", r.Key, seq, last)
			}
			lastByKey[string(r.Key)] = seq
		}
	}
	if len(seen) != to-from {
		return fmt.Errorf("received %d distinct records, want %d", len(seen), to-from)
	}
	return nil
}

// closeAll commits what each member polled (all of them before anyone leaves, so no rebalance
// intervenes), then closes them all, which leaves the group.
func closeAll(ctx context.Context, members []*member) error {
	var err error
	for _, mb := range members {
		if e := mb.cl.CommitUncommittedOffsets(ctx); e != nil && err == nil {
			err = fmt.Errorf("%s: commit: %w", mb.name, e)
		}
	}
	for _, mb := range members {
		mb.cl.Close()
	}
	return err
}

// offsets returns the group's committed offsets and the topic's end offsets, per partition.
func offsets(ctx context.Context, group, topic string) (committed, end map[int32]int64, err error) {
	cl, err := newClient()
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, nil, fmt.Errorf("FetchOffsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("ListEndOffsets: %w", err)
	}
	committed, end = map[int32]int64{}, map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		c, ok := fetched.Lookup(topic, p)
		if !ok {
			return nil, nil, fmt.Errorf("no committed offset for partition %d", p)
		}
		if c.Err != nil {
			return nil, nil, fmt.Errorf("partition %d: committed offset: %w", p, c.Err)
		}
		e, ok := ends.Lookup(topic, p)
		if !ok || e.Err != nil {
			return nil, nil, fmt.Errorf("partition %d: end offset missing (%v)", p, e.Err)
		}
		committed[p], end[p] = c.At, e.Offset
	}
	return committed, end, nil
}

func sameOffsets(what string, got, want map[int32]int64) error {
	for p := int32(0); p < partitions; p++ {
		if got[p] != want[p] {
			return fmt.Errorf("%s: partition %d: %d, want %d (all: %v vs %v)", what, p, got[p], want[p], got, want)
		}
	}
	return nil
}

func brokerCtlRun(ctx context.Context, args ...string) error {
	if brokerCtl == "" {
		return errors.New("BROKER_CTL is not set")
	}
	for _, a := range args {
		out, err := exec.CommandContext(ctx, brokerCtl, a).CombinedOutput()
		if err != nil {
			return fmt.Errorf("broker-ctl %s: %v: %s", a, err, out)
		}
	}
	return nil
}

// logVersions notes the OffsetCommit/OffsetFetch versions this client and the broker share.
func logVersions(ctx context.Context) {
	cl, err := newClient()
	if err != nil {
		return
	}
	defer cl.Close()
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		note("ApiVersions: %v", err)
		return
	}
	vs.Each(func(v kadm.BrokerApiVersions) {
		for _, k := range []struct {
			key    int16
			name   string
			client int16
		}{{8, "OffsetCommit", 10}, {9, "OffsetFetch", 10}} {
			if _, max, ok := v.KeyVersions(k.key); ok {
				note("%s: broker %d serves up to v%d, franz-go up to v%d: v%d in use",
					k.name, v.NodeID, max, k.client, min(max, k.client))
			}
		}
	})
}

func main() {
	if bootstrap == "" {
		fmt.Printf("FAIL %s setup: BOOTSTRAP is not set\n", suite)
		os.Exit(1)
	}
	tag := fmt.Sprintf("%x", time.Now().UnixNano()%0xffffff)
	topic := "franz-go-group-" + tag
	group := "franz-go-group-" + tag
	var committed map[int32]int64

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	logVersions(ctx)
	cancel()

	ok := run("group-two-consumers", 90*time.Second, func(ctx context.Context) error {
		cl, err := newClient()
		if err != nil {
			return err
		}
		_, err = kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic)
		cl.Close()
		if err != nil {
			return fmt.Errorf("create topic: %w", err)
		}
		var members []*member
		defer func() {
			for _, mb := range members {
				mb.cl.Close()
			}
		}()
		for _, name := range []string{"a", "b"} {
			mb, err := newMember(name, group, topic)
			if err != nil {
				return err
			}
			members = append(members, mb)
		}
		// Poll while the group forms (there is nothing to read yet), until both members own
		// partitions and together own all of them.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, mb := range members {
			wg.Add(1)
			go mb.poll(stop, &wg)
		}
		err = waitFor(ctx, "both members to own partitions", func() bool {
			a, b := members[0].partitions(), members[1].partitions()
			return len(a) > 0 && len(b) > 0 && len(a)+len(b) == partitions
		})
		close(stop)
		wg.Wait()
		if err != nil {
			return fmt.Errorf("%w (a owns %v, b owns %v)", err, members[0].partitions(), members[1].partitions())
		}
		note("assignment: a owns %v, b owns %v", members[0].partitions(), members[1].partitions())
		if err := produce(ctx, topic, 0, n); err != nil {
			return err
		}
		if err := consume(ctx, members, n); err != nil {
			return err
		}
		note("a got %d records, b got %d", members[0].count(), members[1].count())
		for _, mb := range members {
			if mb.count() == 0 {
				return fmt.Errorf("member %s owns %v but received nothing", mb.name, mb.partitions())
			}
		}
		if err := check(members, 0, n, map[int32]int64{0: 0, 1: 0, 2: 0}); err != nil {
			return err
		}
		err = closeAll(ctx, members)
		members = nil
		return err
	})
	if ok {
		ok = run("committed-equals-end", 30*time.Second, func(ctx context.Context) error {
			c, e, err := offsets(ctx, group, topic)
			if err != nil {
				return err
			}
			committed = c
			note("committed %v, end %v", c, e)
			return sameOffsets("committed vs end", c, e)
		})
	} else {
		notRun("committed-equals-end", "group-two-consumers")
	}

	from := n
	for _, round := range []struct{ how, survive, resume string }{
		{"restart", "commits-survive-restart", "resume-after-restart"},
		{"kill9", "commits-survive-kill9", "resume-after-kill9"},
	} {
		if !ok {
			notRun(round.survive, "an earlier scenario")
			notRun(round.resume, "an earlier scenario")
			continue
		}
		ok = run(round.survive, 150*time.Second, func(ctx context.Context) error {
			steps := []string{"restart"}
			if round.how == "kill9" {
				steps = []string{"kill9", "start"}
			}
			if err := brokerCtlRun(ctx, steps...); err != nil {
				return err
			}
			c, e, err := offsets(ctx, group, topic)
			if err != nil {
				return err
			}
			if err := sameOffsets("committed after "+round.how, c, committed); err != nil {
				return err
			}
			return sameOffsets("end after "+round.how, e, committed)
		})
		if !ok {
			notRun(round.resume, round.survive)
			continue
		}
		ok = run(round.resume, 90*time.Second, func(ctx context.Context) error {
			if err := produce(ctx, topic, from, from+m); err != nil {
				return err
			}
			mb, err := newMember("c-"+round.how, group, topic)
			if err != nil {
				return err
			}
			err = consume(ctx, []*member{mb}, m)
			if err == nil {
				err = check([]*member{mb}, from, from+m, committed)
			}
			if err != nil {
				mb.cl.Close()
				return err
			}
			if err := closeAll(ctx, []*member{mb}); err != nil {
				return err
			}
			c, e, err := offsets(ctx, group, topic)
			if err != nil {
				return err
			}
			if err := sameOffsets("committed vs end after resuming", c, e); err != nil {
				return err
			}
			committed = c
			from += m
			return nil
		})
	}
	if failed {
		os.Exit(1)
	}
}
