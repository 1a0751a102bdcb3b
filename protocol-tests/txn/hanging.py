#!/usr/bin/env python3
"""Writes a hanging transaction: an open transaction on a partition that no transaction
coordinator knows about, the case `kafka-transactions find-hanging` exists for. An
InitProducerId without a transactional id gets a producer id (as an idempotent producer's),
then a Produce (v8) carries one v2 batch of 3 records with that producer id and the
transactional bit set, under a made-up transactional id. Only a broker with
transaction.partition.verification.enable=false takes it (KIP-890 verification refuses it).
Requests and the batch are encoded with kafka-python's protocol classes.

Usage: hanging.py BOOTSTRAP TOPIC    prints `OK <producer id> <base offset>`
"""
import socket
import struct
import sys
import time

from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

host, port = sys.argv[1].rsplit(":", 1)
topic = sys.argv[2]
sock = socket.create_connection((host, int(port)), timeout=30)


def call(req, resp_cls, version, corr):
    req.with_header(correlation_id=corr, client_id="sluice-hanging")
    sock.sendall(req.encode(version=version, header=True, framed=True))
    size = struct.unpack(">i", recv(4))[0]
    return resp_cls.decode(recv(size), version=version, header=True)


def recv(n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise SystemExit("ERROR the broker closed the connection")
        buf += chunk
    return buf


# COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE right after start-up: retry
for attempt in range(60):
    ip = call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
              InitProducerIdResponse, 1, 1 + attempt)
    if ip.error_code not in (14, 15):
        break
    time.sleep(0.5)
if ip.error_code != 0:
    raise SystemExit("ERROR InitProducerId error %d" % ip.error_code)

b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                              producer_id=ip.producer_id, producer_epoch=ip.producer_epoch,
                              base_sequence=0, batch_size=1 << 20)
now = int(time.time() * 1000)
for i in range(3):
    b.append(i, timestamp=now, key=None, value=b"hanging-%d" % i, headers=[])
records = bytes(b.build())

P = ProduceRequest.TopicProduceData
req = ProduceRequest(transactional_id="sluice-no-such-txn", acks=-1, timeout_ms=10000, topic_data=[
    P(name=topic, partition_data=[P.PartitionProduceData(index=0, records=records)])])
resp = call(req, ProduceResponse, 8, 2)
part = resp.responses[0].partition_responses[0]
if part.error_code != 0:
    raise SystemExit("ERROR Produce error %d" % part.error_code)
print("OK %d %d" % (ip.producer_id, part.base_offset))
