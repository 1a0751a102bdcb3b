#!/usr/bin/env python3
"""Kafka Streams word count on one broker, killed with SIGKILL and restarted mid-run: see ./run."""
import shlex

import killtests
import txnlib as L
from harness import BOOTSTRAP, BROKER_CTL, Suite, check

S = Suite("streams")


def kill_and_restart():
    check(BROKER_CTL, "BROKER_CTL is not set")
    t = L.shell(shlex.split(BROKER_CTL) + ["kill9"])
    t += L.shell(shlex.split(BROKER_CTL) + ["start"])
    return "broker killed -9 and restarted in %.1fs" % t


@S.scenario("wordcount-eos-kill9", timeout=400)
def wordcount_eos():
    killtests.wordcount(BOOTSTRAP, "exactly_once_v2", kill_and_restart, "wc-eos")


@S.scenario("wordcount-alos-kill9", timeout=400)
def wordcount_alos():
    killtests.wordcount(BOOTSTRAP, "at_least_once", kill_and_restart, "wc-alos")


if __name__ == "__main__":
    S.main()
