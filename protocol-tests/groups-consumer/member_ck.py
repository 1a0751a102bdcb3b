#!/usr/bin/env python3
"""One confluent-kafka (librdkafka) group member for the groups-consumer suite, in its own
process, with group.protocol=consumer. Same output as protocol-tests/java's ConsumerMember:
ASSIGNED <t-p,...> after each change, READ <n>, COMMITTED, ERROR <msg>, CLOSED.
Args: bootstrap group topics [key=value ...]; runs until stdin closes."""
import sys
import threading

from confluent_kafka import Consumer, KafkaException


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    bootstrap, group, topics = sys.argv[1:4]
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    for kv in sys.argv[4:]:
        k, v = kv.split("=", 1)
        conf[k] = v
    owned = set()

    def show():
        say("ASSIGNED " + ",".join(sorted("%s-%d" % tp for tp in owned)))

    def on_assign(c, parts):
        c.incremental_assign(parts)
        owned.update((tp.topic, tp.partition) for tp in parts)
        show()

    def on_revoke(c, parts):
        c.incremental_unassign(parts)
        owned.difference_update((tp.topic, tp.partition) for tp in parts)
        show()

    done = threading.Event()

    def watch_stdin():
        sys.stdin.read()
        done.set()

    threading.Thread(target=watch_stdin, daemon=True).start()
    c = Consumer(conf)
    c.subscribe(topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    read = 0
    while not done.is_set():
        m = c.poll(0.2)
        if m is None:
            continue
        if m.error():
            if m.error().fatal():
                say("ERROR " + str(m.error()))
                sys.exit(3)
            continue
        read += 1
        try:
            c.commit(message=m, asynchronous=False)
        except KafkaException as e:
            say("ERROR commit " + str(e))
            continue
        say("READ %d" % read)
        say("COMMITTED")
    c.close()
    say("CLOSED")


if __name__ == "__main__":
    main()
