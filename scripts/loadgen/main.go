// loadgen: the native load generator of scripts/bench, built on franz-go (kgo).
//
// It produces or consumes a bounded number of records and prints one JSON line with the
// result, so that it always stops by itself:
//
//	loadgen -mode produce -brokers 127.0.0.1:9092 -topic t -size 1024 -count 100000 -acks 1
//	loadgen -mode produce ... -rate 20000 -linger 0s     # paced; per-record latency in µs
//	loadgen -mode consume -brokers ... -topic t -count 100000   # partition 0 from the start
//	loadgen ... -acks all -rate 500 -linger 0s -ack-log acks.txt  # one line per delivery
//
// -brokers takes a comma-separated list of seed brokers. -ack-log writes one line per
// delivered record, in delivery order: the wall-clock time of the delivery in Unix
// microseconds and "ok" or the error (scripts/bench uses it to time a leader fail-over).
//
// Produce latency is the time from handing the record to the client until its delivery
// promise fires (the broker's response), measured with the monotonic clock. Pacing sleeps
// (it never spins), so a throttled run leaves the CPU to the broker.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	Mode     string  `json:"mode"`
	Records  int64   `json:"records"`
	Bytes    int64   `json:"bytes"`
	Errors   int64   `json:"errors"`
	Seconds  float64 `json:"seconds"`
	RecPerS  float64 `json:"rec_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	P50us    float64 `json:"p50_us,omitempty"`
	P99us    float64 `json:"p99_us,omitempty"`
	P999us   float64 `json:"p999_us,omitempty"`
	MaxUs    float64 `json:"max_us,omitempty"`
	AvgUs    float64 `json:"avg_us,omitempty"`
	FirstErr string  `json:"first_error,omitempty"`
}

func main() {
	var (
		brokers   = flag.String("brokers", "127.0.0.1:9092", "seed broker")
		topic     = flag.String("topic", "", "topic")
		mode      = flag.String("mode", "produce", "produce | consume")
		partition = flag.Int("partition", 0, "partition to produce to / consume (-1: produce round-robin over all)")
		size      = flag.Int("size", 1024, "record value bytes (produce)")
		count     = flag.Int64("count", 100000, "records to produce / consume")
		rate      = flag.Float64("rate", 0, "records per second (produce; 0 = as fast as possible)")
		acks      = flag.String("acks", "1", "0 | 1 | all (produce)")
		linger    = flag.Duration("linger", 5*time.Millisecond, "producer linger")
		batchMax  = flag.Int("batch-max-bytes", 1000000, "producer batch size limit per partition")
		inflight  = flag.Int("inflight", 5, "produce requests in flight per broker (the Java client's default is 5)")
		fetchMax  = flag.Int("fetch-max-partition-bytes", 1<<20, "consumer bytes per partition per fetch")
		timeout   = flag.Duration("timeout", 120*time.Second, "give up after this long")
		ackLog    = flag.String("ack-log", "", "write each delivery's Unix time in µs and outcome to this file (produce)")
		backoff   = flag.Duration("retry-backoff", 0, "a fixed wait between retries (0: the client's default, jittered and growing)")
		metaAge   = flag.Duration("metadata-min-age", 0, "the least time between metadata refreshes (0: the client's default, 5s)")
		tlsCA     = flag.String("tls-ca", "", "connect over TLS, trusting the CA certificates in this PEM file")
	)
	flag.Parse()
	if *topic == "" {
		fail("-topic is required")
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ClientID("sluice-loadgen"),
		kgo.RetryTimeout(*timeout),
	}
	if *metaAge > 0 {
		opts = append(opts, kgo.MetadataMinAge(*metaAge))
	}
	if *tlsCA != "" {
		pem, err := os.ReadFile(*tlsCA)
		if err != nil {
			fail("-tls-ca: " + err.Error())
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			fail("-tls-ca: no certificate in " + *tlsCA)
		}
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{RootCAs: roots, ServerName: "localhost"}))
	}
	if *backoff > 0 {
		d := *backoff
		opts = append(opts, kgo.RetryBackoffFn(func(int) time.Duration { return d }))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var res result
	switch *mode {
	case "produce":
		opts = append(opts,
			kgo.DefaultProduceTopic(*topic),
			kgo.DisableIdempotentWrite(),
			kgo.MaxProduceRequestsInflightPerBroker(*inflight),
			kgo.ProducerLinger(*linger),
			kgo.ProducerBatchMaxBytes(int32(*batchMax)),
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.MaxBufferedRecords(max(1000, min(1000000, (64<<20) / *size))),
		)
		switch *acks {
		case "0":
			opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
		case "1":
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
		case "all", "-1":
			opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		default:
			fail("bad -acks " + *acks)
		}
		if *partition >= 0 {
			opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		} else {
			opts = append(opts, kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
		}
		res = produce(ctx, opts, int32(*partition), *size, *count, *rate, *ackLog)
	case "consume":
		opts = append(opts,
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
				*topic: {int32(*partition): kgo.NewOffset().AtStart()},
			}),
			kgo.FetchMaxPartitionBytes(int32(*fetchMax)),
			kgo.FetchMaxBytes(int32(max(*fetchMax, 50<<20))),
		)
		res = consume(ctx, opts, *count)
	default:
		fail("bad -mode " + *mode)
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if res.Errors > 0 || res.Records < *count {
		os.Exit(1)
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "loadgen: "+msg)
	os.Exit(2)
}

func produce(ctx context.Context, opts []kgo.Opt, partition int32, size int, count int64, rate float64, ackLog string) result {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	// Wait for metadata so the first record's latency does not include the connection setup.
	if err := cl.Ping(ctx); err != nil {
		fail("ping: " + err.Error())
	}
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	lat := make([]uint32, count)
	var acked []int64 // delivery wall-clock times, Unix µs (-ack-log)
	var ackErr []string
	if ackLog != "" {
		acked, ackErr = make([]int64, count), make([]string, count)
	}
	var done, errs, bytes atomic.Int64
	var firstErr sync.Once
	var firstErrMsg string
	var wg sync.WaitGroup
	wg.Add(int(count))
	start := time.Now()
	for i := int64(0); i < count; i++ {
		if rate > 0 {
			due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
			if d := time.Until(due); d > 200*time.Microsecond {
				time.Sleep(d)
			}
		}
		r := &kgo.Record{Value: value, Partition: partition}
		sent := time.Now()
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			us := time.Since(sent).Microseconds()
			n := done.Add(1) - 1
			lat[n] = uint32(min(us, 1<<31))
			if acked != nil {
				acked[n] = time.Now().UnixMicro()
				if err != nil {
					ackErr[n] = strings.ReplaceAll(err.Error(), "\n", " ")
				}
			}
			if err != nil {
				errs.Add(1)
				firstErr.Do(func() { firstErrMsg = err.Error() })
			} else {
				bytes.Add(int64(len(r.Value)))
			}
			wg.Done()
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if acked != nil {
		writeAckLog(ackLog, acked, ackErr)
	}
	res := result{Mode: "produce", Records: done.Load() - errs.Load(), Bytes: bytes.Load(),
		Errors: errs.Load(), Seconds: elapsed, FirstErr: firstErrMsg}
	res.RecPerS = float64(res.Records) / elapsed
	res.MBPerS = float64(res.Bytes) / elapsed / 1e6
	sort.Slice(lat, func(a, b int) bool { return lat[a] < lat[b] })
	if len(lat) > 0 {
		pick := func(q float64) float64 { return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) }
		res.P50us, res.P99us, res.P999us, res.MaxUs = pick(0.50), pick(0.99), pick(0.999), float64(lat[len(lat)-1])
		var sum float64
		for _, v := range lat {
			sum += float64(v)
		}
		res.AvgUs = sum / float64(len(lat))
	}
	return res
}

func writeAckLog(path string, acked []int64, ackErr []string) {
	var b strings.Builder
	for i, t := range acked {
		outcome := "ok"
		if ackErr[i] != "" {
			outcome = ackErr[i]
		}
		fmt.Fprintf(&b, "%d %s\n", t, outcome)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		fail("ack-log: " + err.Error())
	}
}

func consume(ctx context.Context, opts []kgo.Opt, count int64) result {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err.Error())
	}
	defer cl.Close()
	if err := cl.Ping(ctx); err != nil {
		fail("ping: " + err.Error())
	}
	var recs, bytes, errs int64
	var firstErr string
	start := time.Now()
	for recs < count && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(_ string, _ int32, err error) {
			if ctx.Err() == nil {
				errs++
				if firstErr == "" {
					firstErr = err.Error()
				}
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			recs++
			bytes += int64(len(r.Value) + len(r.Key))
		})
		if errs > 0 {
			break
		}
	}
	elapsed := time.Since(start).Seconds()
	return result{Mode: "consume", Records: recs, Bytes: bytes, Errors: errs, Seconds: elapsed,
		RecPerS: float64(recs) / elapsed, MBPerS: float64(bytes) / elapsed / 1e6, FirstErr: firstErr}
}
