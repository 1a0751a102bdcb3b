"""Topic admin for the kcat suite (kcat itself cannot create or delete topics).

Uses confluent-kafka's AdminClient (CreateTopics/DeleteTopics), from the venv scripts/test sets up.
    python3 admin.py create TOPIC PARTITIONS [TOPIC PARTITIONS ...]
    python3 admin.py delete TOPIC [TOPIC ...]
Env: BOOTSTRAP. Exit 0 on success; the error on stderr otherwise.
"""
import os
import sys

from confluent_kafka.admin import AdminClient, NewTopic


def main(argv):
    if len(argv) < 2 or argv[0] not in ("create", "delete"):
        print(__doc__, file=sys.stderr)
        return 2
    admin = AdminClient({"bootstrap.servers": os.environ["BOOTSTRAP"], "socket.timeout.ms": 10000})
    if argv[0] == "create":
        pairs = argv[1:]
        topics = [NewTopic(pairs[i], num_partitions=int(pairs[i + 1]), replication_factor=1)
                  for i in range(0, len(pairs), 2)]
        futures = admin.create_topics(topics, operation_timeout=20, request_timeout=30)
    else:
        futures = admin.delete_topics(argv[1:], operation_timeout=20, request_timeout=30)
    failed = 0
    for name, fut in futures.items():
        try:
            fut.result(timeout=40)
        except Exception as e:  # KafkaException carries the broker's error
            print("%s %s: %s" % (argv[0], name, e), file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
