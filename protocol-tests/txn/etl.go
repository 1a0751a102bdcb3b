// The txn suite's franz-go program (franz-go-etl-rebalance): an exactly-once ETL copy with
// kgo.GroupTransactSession through two group rebalances.
//
// N records go to a 6-partition input topic (value v-<i>, partition i mod 6). Member A (its
// own transactional id, group G, read_committed, require-stable offsets) copies them to a
// 6-partition output topic, partition to partition, in transactions of at most 50 records
// whose offsets commit with them (End(TryCommit)). After A has committed a third of the input
// it pauses until it has been revoked partitions; meanwhile member B joins (rebalance 1), and
// once B has committed records A leaves the group (rebalance 2) and B copies the rest.
// A transaction that a rebalance overtakes is aborted by the session and its records are
// fetched again from the committed offsets. Then a plain record END goes to each output
// partition, and a read_committed reader reads each partition up to its END: it must be the
// input partition exactly (every record once, in order), and the group's committed offsets
// must be the input's end offsets.
//
// Usage: etl -bootstrap host:port[,host:port...] -tag <name prefix> [-n 6000]; prints `OK <details>` or
// `FAIL <reason>` as its last line (exit 0 / 1).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const parts = 6

var (
	bootstrap = flag.String("bootstrap", "127.0.0.1:9092", "broker")
	tag       = flag.String("tag", "fg", "prefix of topic, group and transactional ids")
	n         = flag.Int("n", 6000, "input records")
)

func note(format string, args ...any) { fmt.Fprintf(os.Stderr, "# "+format+"\n", args...) }

type member struct {
	name      string
	committed atomic.Int64 // records in committed transactions
	aborted   atomic.Int64 // transactions the session aborted
	revokes   atomic.Int64 // OnPartitionsRevoked calls that took partitions away
	assigned  atomic.Int64
	failure   atomic.Pointer[error]
	done      chan struct{}
	stop      chan struct{}
}

func (m *member) fail(err error) { m.failure.CompareAndSwap(nil, &err) }

// error is the member's failure (nil while it runs fine).
func (m *member) error() error {
	if e := m.failure.Load(); e != nil {
		return fmt.Errorf("%s: %w", m.name, *e)
	}
	return nil
}

func client(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID("sluice-txn-etl"), kgo.RetryTimeout(60 * time.Second),
	}, opts...)...)
}

// run copies until stop is closed; pauseAt > 0: after that many committed records, wait
// (bounded) until this member has been revoked partitions.
func (m *member) run(ctx context.Context, in, out, group string, pauseAt int64) {
	defer close(m.done)
	s, err := kgo.NewGroupTransactSession(
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID("sluice-txn-etl-"+m.name),
		kgo.TransactionalID(*tag+"-tx-"+m.name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { m.assigned.Add(1) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, rev map[string][]int32) {
			if len(rev[in]) > 0 {
				m.revokes.Add(1)
			}
		}),
	)
	if err != nil {
		m.fail(err)
		return
	}
	defer s.Close()
	paused := false
	for {
		select {
		case <-m.stop:
			return
		default:
		}
		if pauseAt > 0 && !paused && m.committed.Load() >= pauseAt {
			paused = true
			deadline := time.Now().Add(60 * time.Second)
			for m.revokes.Load() == 0 && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond)
			}
			note("%s: paused at %d committed, revoked %d time(s)", m.name, m.committed.Load(), m.revokes.Load())
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := s.PollRecords(pctx, 50)
		cancel()
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		var ferr error
		fs.EachError(func(t string, p int32, e error) {
			if !errors.Is(e, context.DeadlineExceeded) && !errors.Is(e, context.Canceled) {
				ferr = fmt.Errorf("fetch %s/%d: %w", t, p, e)
			}
		})
		if ferr != nil {
			m.fail(ferr)
			return
		}
		recs := fs.Records()
		if len(recs) == 0 {
			continue
		}
		if err := s.Begin(); err != nil {
			m.fail(fmt.Errorf("begin: %w", err))
			return
		}
		var perr atomic.Value
		for _, r := range recs {
			s.Produce(ctx, &kgo.Record{Topic: out, Partition: r.Partition, Key: r.Key, Value: r.Value},
				func(_ *kgo.Record, err error) {
					if err != nil {
						perr.Store(err)
					}
				})
		}
		committed, err := s.End(ctx, kgo.TryCommit)
		if err != nil {
			m.fail(fmt.Errorf("end: %w", err))
			return
		}
		if committed {
			if e, _ := perr.Load().(error); e != nil {
				m.fail(fmt.Errorf("committed a transaction with a failed produce: %w", e))
				return
			}
			m.committed.Add(int64(len(recs)))
		} else {
			m.aborted.Add(1)
		}
	}
}

func waitFor(what string, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

func run() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	in, out, group := *tag+"-in", *tag+"-out", *tag+"-g"
	cl, err := client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range []string{in, out} {
		if _, err := adm.CreateTopic(ctx, parts, -1, nil, t); err != nil {
			return "", fmt.Errorf("create %s: %w", t, err)
		}
	}
	want := make([][]string, parts)
	var recs []*kgo.Record
	for i := 0; i < *n; i++ {
		v := fmt.Sprintf("v-%06d", i)
		p := int32(i % parts)
		want[p] = append(want[p], v)
		recs = append(recs, &kgo.Record{Topic: in, Partition: p, Value: []byte(v)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return "", fmt.Errorf("produce input: %w", err)
	}

	a := &member{name: "A", done: make(chan struct{}), stop: make(chan struct{})}
	b := &member{name: "B", done: make(chan struct{}), stop: make(chan struct{})}
	// The members' context ends when they are stopped: a member blocked in a client call
	// (a broker that never answers) returns then, instead of holding up the end of run.
	mctx, mcancel := context.WithCancel(ctx)
	stopAll := sync.OnceFunc(func() { close(a.stop); close(b.stop); mcancel(); <-a.done; <-b.done })
	defer stopAll()

	go a.run(mctx, in, out, group, int64(*n/3))
	if err := waitFor("A to commit a third", 60*time.Second, func() bool {
		return a.committed.Load() >= int64(*n/3) || a.error() != nil
	}); err != nil || a.error() != nil {
		return "", errors.Join(err, a.error())
	}
	go b.run(mctx, in, out, group, 0)
	if err := waitFor("B to commit records", 60*time.Second, func() bool {
		return b.committed.Load() > 0 || b.error() != nil || a.error() != nil
	}); err != nil || a.error() != nil || b.error() != nil {
		return "", errors.Join(err, a.error(), b.error())
	}
	close(a.stop) // A leaves the group: rebalance 2
	<-a.done
	a.stop = make(chan struct{}) // for stopAll
	if err := a.error(); err != nil {
		return "", err
	}
	offsetsDone := func() bool {
		fo, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		for p := 0; p < parts; p++ {
			o, ok := fo.Lookup(in, int32(p))
			if !ok || o.Err != nil || o.At != int64(len(want[p])) {
				return false
			}
		}
		return true
	}
	if err := waitFor("the group's offsets to reach the input's end", 90*time.Second, func() bool {
		return b.error() != nil || offsetsDone()
	}); err != nil || b.error() != nil {
		return "", errors.Join(err, b.error())
	}
	stopAll()
	if a.revokes.Load() == 0 || a.assigned.Load() < 2 {
		return "", fmt.Errorf("no rebalance reached A (revoked %d, assigned %d)", a.revokes.Load(), a.assigned.Load())
	}

	var ends []*kgo.Record
	for p := int32(0); p < parts; p++ {
		ends = append(ends, &kgo.Record{Topic: out, Partition: p, Value: []byte("END")})
	}
	if err := cl.ProduceSync(ctx, ends...).FirstErr(); err != nil {
		return "", fmt.Errorf("produce END: %w", err)
	}
	rd, err := client(kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{out: allAtStart()}))
	if err != nil {
		return "", err
	}
	defer rd.Close()
	got := make([][]string, parts)
	ended := 0
	for ended < parts {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return "", fmt.Errorf("reading the output: %d partitions ended: %w", ended, err)
		}
		if e := fs.Err(); e != nil {
			return "", fmt.Errorf("reading the output: %w", e)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "END" {
				ended++
			} else {
				got[r.Partition] = append(got[r.Partition], string(r.Value))
			}
		})
	}
	copied, dup, lost := 0, 0, 0
	for p := 0; p < parts; p++ {
		seen := map[string]int{}
		for _, v := range got[p] {
			seen[v]++
		}
		for _, v := range want[p] {
			if seen[v] > 0 {
				copied++
				seen[v]--
			} else {
				lost++
			}
		}
		for _, c := range seen {
			dup += c
		}
		if dup == 0 && lost == 0 && fmt.Sprint(got[p]) != fmt.Sprint(want[p]) {
			return "", fmt.Errorf("output partition %d holds the input records out of order", p)
		}
	}
	res := fmt.Sprintf("copied %d, duplicated %d, lost %d; A committed %d (revoked %d, aborted %d txns), B committed %d (aborted %d txns)",
		copied, dup, lost, a.committed.Load(), a.revokes.Load(), a.aborted.Load(), b.committed.Load(), b.aborted.Load())
	if dup != 0 || lost != 0 {
		return "", errors.New("not exactly once: " + res)
	}
	return res, nil
}

func allAtStart() map[int32]kgo.Offset {
	m := map[int32]kgo.Offset{}
	for p := int32(0); p < parts; p++ {
		m[p] = kgo.NewOffset().AtStart()
	}
	return m
}

func main() {
	flag.Parse()
	res, err := run()
	if err != nil {
		fmt.Println("FAIL " + err.Error())
		os.Exit(1)
	}
	fmt.Println("OK " + res)
}
