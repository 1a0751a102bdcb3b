#!/usr/bin/env python3
"""Opens a transaction and keeps it open: a transactional confluent-kafka producer writes
COUNT records to partition 0 of TOPIC, flushes, prints `READY`, and sleeps until it is killed
(the transaction is never ended by this process).

Usage: open_txn.py BOOTSTRAP TOPIC TRANSACTIONAL_ID TRANSACTION_TIMEOUT_MS COUNT
"""
import sys
import time

from confluent_kafka import Producer

bootstrap, topic, txn_id, timeout_ms, count = sys.argv[1:6]
p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
              "transaction.timeout.ms": int(timeout_ms), "linger.ms": 5})
p.init_transactions(30)
p.begin_transaction()
errors = []
for i in range(int(count)):
    p.produce(topic, value=b"open-%d" % i, partition=0,
              on_delivery=lambda err, msg: err and errors.append(err))
left = p.flush(30)
if left or errors:
    print("ERROR undelivered %d, errors %s" % (left, errors[:3]), flush=True)
    sys.exit(1)
print("READY", flush=True)
time.sleep(3600)
