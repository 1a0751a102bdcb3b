# Compose scenarios of the containers suite, sourced by ./run (which defines IMAGE, PY, here,
# root, prefix, pass/fail/note, wait_answers, free_port, port_in_use and the cleanup trap).
#
# kafka-*: apache/kafka's own compose examples (kafka-examples/: their environment setting for
# setting, only the image changed), on the host ports the examples publish.
# compose-*: Sluice's compose files (config/compose/) on free host ports.
# Each compose project is named with this run's prefix and brought down (volumes too) at the
# end of its scenario and again by the exit trap.

compose_projects=()
compose_down_all() {
    local entry
    for entry in "${compose_projects[@]}"; do
        podman-compose -p "${entry%%|*}" -f "${entry#*|}" down -v -t 2 >/dev/null 2>&1
    done
}
trap 'compose_down_all; cleanup' EXIT

# compose_up PROJECT FILE: `up -d` with IMAGE / SLUICE_IMAGE set to this run's image
compose_up() {
    compose_projects+=("$1|$2")
    IMAGE="$IMAGE" SLUICE_IMAGE="$IMAGE" SLUICE_PREFIX="$prefix" \
        podman-compose -p "$1" -f "$2" up -d >&2 2>&1
}
compose_down() {
    IMAGE="$IMAGE" SLUICE_IMAGE="$IMAGE" SLUICE_PREFIX="$prefix" \
        podman-compose -p "$1" -f "$2" down -v -t 2 >/dev/null 2>&1
}
compose_logs() {
    IMAGE="$IMAGE" SLUICE_IMAGE="$IMAGE" SLUICE_PREFIX="$prefix" \
        podman-compose -p "$1" -f "$2" logs 2>&1 | tail -n 40 | sed 's/^/#   | /' >&2
}

# records CMD BOOTSTRAP TOPIC N [VAR=value...]: records.py with extra environment
records() {
    local cmd="$1" bootstrap="$2" topic="$3" n="$4"
    shift 4
    env "$@" "$PY" "$here/records.py" "$cmd" "$bootstrap" "$topic" "$n"
}

# ports_free SCENARIO PORT...: fails the scenario naming a host port that is taken
ports_free() {
    local s="$1" p
    shift
    for p in "$@"; do
        if port_in_use "$p"; then
            fail "$s" "host port $p, which the compose file publishes, is in use"
            return 1
        fi
    done
}

# round_trip SCENARIO BOOTSTRAP [VAR=value...]: N records produced and read back
round_trip() {
    local s="$1" bootstrap="$2" out topic="containers-$1-$$"
    shift 2
    if ! out="$(records produce "$bootstrap" "$topic" "$N" "$@" 2>&1)"; then
        fail "$s" "produce through $bootstrap: $(echo "$out" | tail -3 | tr '\n' ' ')"
        return 1
    fi
    if ! out="$(records consume "$bootstrap" "$topic" "$N" "$@" 2>&1)"; then
        fail "$s" "consume through $bootstrap: $(echo "$out" | tail -3 | tr '\n' ' ')"
        return 1
    fi
}

# example SCENARIO FILE PORT...: bring up one of apache/kafka's examples, wait for the first
# port to answer, round-trip N records through it
example() {
    local s="$1" file="$2" project="$prefix-$1"
    shift 2
    local first="$1"
    ports_free "$s" "$@" || return 0
    local t0
    t0=$(now_ms)
    if ! compose_up "$project" "$file"; then
        fail "$s" "podman-compose up failed"
    elif ! wait_answers "$first" 60; then
        fail "$s" "nothing answers on localhost:$first within 60 s"
        compose_logs "$project" "$file"
    else
        local t_ready=$(($(now_ms) - t0))
        if round_trip "$s" "localhost:$first" RECORDS_RF="${EXAMPLE_RF:-1}"; then
            pass "$s ($N records through localhost:$first; first answer ${t_ready} ms after up)"
        else
            compose_logs "$project" "$file"
        fi
    fi
    compose_down "$project" "$file"
}

ex="$here/kafka-examples"
example kafka-single-node-plaintext "$ex/single-node-plaintext.yml" 9092
EXAMPLE_RF=3 example kafka-cluster-combined "$ex/cluster-combined.yml" 29092 39092 49092
EXAMPLE_RF=3 example kafka-cluster-isolated "$ex/cluster-isolated.yml" 29092 39092 49092

# kafka-single-node-sasl: the SASL_PLAINTEXT example with its JAAS file (KAFKA_OPTS): alice
# with her password round-trips records; a wrong password and a client without SASL get none
s=kafka-single-node-sasl
file="$ex/single-node-sasl.yml"
project="$prefix-$s"
if ports_free "$s" 9094; then
    if ! compose_up "$project" "$file"; then
        fail "$s" "podman-compose up failed"
    elif ! wait_answers 9094 60; then
        fail "$s" "nothing answers on localhost:9094 within 60 s"
        compose_logs "$project" "$file"
    elif round_trip "$s" localhost:9094 RECORDS_SASL=alice:alice-secret; then
        topic="containers-sasl-refused-$$"
        if records produce localhost:9094 "$topic" 1 RECORDS_SASL=alice:wrong \
            RECORDS_DEADLINE=10 >/dev/null 2>&1; then
            fail "$s" "a wrong password was let in"
        elif records produce localhost:9094 "$topic" 1 RECORDS_DEADLINE=10 >/dev/null 2>&1; then
            fail "$s" "a client without SASL was let in"
        elif ! records consume localhost:9094 "containers-$s-$$" "$N" \
            RECORDS_SASL=alice:alice-secret >/dev/null 2>&1; then
            fail "$s" "records gone after the refused logins"
        else
            pass "$s ($N records as alice; wrong password and no SASL refused)"
        fi
    else
        compose_logs "$project" "$file"
    fi
    compose_down "$project" "$file"
fi

# compose-single-node: config/compose/single-node.yml
s=compose-single-node
file="$root/config/compose/single-node.yml"
project="$prefix-$s"
port="$(free_port)"
if ! SLUICE_PORT="$port" compose_up "$project" "$file"; then
    fail "$s" "podman-compose up failed"
elif ! wait_answers "$port" 60; then
    fail "$s" "nothing answers on localhost:$port within 60 s"
    SLUICE_PORT="$port" compose_logs "$project" "$file"
elif round_trip "$s" "localhost:$port"; then
    pass "$s ($N records through localhost:$port)"
fi
SLUICE_PORT="$port" compose_down "$project" "$file"

# compose-cluster-kill: config/compose/cluster.yml; acks=all records to a topic with three
# replicas (min.insync.replicas=2), one node killed with `podman kill`, more records acked by
# the other two, and every acked record read back from a survivor
s=compose-cluster-kill
file="$root/config/compose/cluster.yml"
project="$prefix-$s"
p1="$(free_port)"
p2="$(free_port)"
p3="$(free_port)"
export SLUICE_PORT_1="$p1" SLUICE_PORT_2="$p2" SLUICE_PORT_3="$p3"
topic="containers-kill-$$"
half=$((N * 2))
if ! compose_up "$project" "$file"; then
    fail "$s" "podman-compose up failed"
elif ! wait_answers "$p1" 60 || ! wait_answers "$p2" 60 || ! wait_answers "$p3" 60; then
    fail "$s" "the three nodes do not all answer within 60 s"
    compose_logs "$project" "$file"
elif ! out="$(records produce "localhost:$p1" "$topic" "$half" RECORDS_RF=3 \
        RECORDS_TOPIC_CONFIG=min.insync.replicas=2 2>&1)"; then
    fail "$s" "produce before the kill: $(echo "$out" | tail -3 | tr '\n' ' ')"
    compose_logs "$project" "$file"
elif ! podman kill "$prefix-2" >/dev/null 2>&1; then
    fail "$s" "podman kill $prefix-2 failed"
elif ! out="$(records produce "localhost:$p1,localhost:$p3" "$topic" "$half" \
        RECORDS_START="$half" RECORDS_DEADLINE=60 2>&1)"; then
    fail "$s" "produce after killing node 2: $(echo "$out" | tail -3 | tr '\n' ' ')"
    compose_logs "$project" "$file"
elif ! out="$(records consume "localhost:$p3" "$topic" $((2 * half)) \
        RECORDS_DEADLINE=60 2>&1)"; then
    fail "$s" "read back: $(echo "$out" | tail -3 | tr '\n' ' ')"
    compose_logs "$project" "$file"
else
    pass "$s ($((2 * half)) acks=all records, $half of them after node 2 was killed, all read back)"
fi
compose_down "$project" "$file"

# compose-cluster-console: config/compose/cluster-console.yml; records produced through the
# host listener show in node 1's console, which lists all three brokers
s=compose-cluster-console
file="$root/config/compose/cluster-console.yml"
project="$prefix-$s"
export SLUICE_PORT_1="$(free_port)" SLUICE_PORT_2="$(free_port)" SLUICE_PORT_3="$(free_port)"
export SLUICE_HTTP_PORT_1="$(free_port)" SLUICE_HTTP_PORT_2="$(free_port)" \
    SLUICE_HTTP_PORT_3="$(free_port)"
if ! compose_up "$project" "$file"; then
    fail "$s" "podman-compose up failed"
elif ! wait_answers "$SLUICE_PORT_1" 60; then
    fail "$s" "node 1 does not answer within 60 s"
    compose_logs "$project" "$file"
elif round_trip "$s" "localhost:$SLUICE_PORT_1" RECORDS_RF=3; then
    topics="$(curl -fsS "http://127.0.0.1:$SLUICE_HTTP_PORT_1/api/topics" 2>&1)"
    brokers="$(curl -fsS "http://127.0.0.1:$SLUICE_HTTP_PORT_1/api/cluster" 2>&1)"
    if [[ "$topics" != *"containers-$s-$$"* ]]; then
        fail "$s" "the console's topics do not list the topic: ${topics:0:300}"
    elif ! echo "$brokers" | "$PY" -c '
import json, sys
hosts = sorted(b["host"] for b in json.load(sys.stdin)["brokers"])
# the console sees the brokers on the inter-broker listener: their compose names
sys.exit(0 if hosts == ["sluice-1", "sluice-2", "sluice-3"] else 1)'; then
        fail "$s" "the console's cluster page: ${brokers:0:300}"
    else
        pass "$s ($N records through localhost:$SLUICE_PORT_1, listed by node 1's console)"
    fi
fi
compose_down "$project" "$file"
unset SLUICE_PORT_1 SLUICE_PORT_2 SLUICE_PORT_3 SLUICE_HTTP_PORT_1 SLUICE_HTTP_PORT_2 \
    SLUICE_HTTP_PORT_3

# testcontainers: the README's recipe. Testcontainers for Python starts the image as a generic
# container through podman's Docker-compatible socket (no Ryuk reaper: its image cannot be
# pulled here; the container is removed by the library, and by name by the exit trap)
s=testcontainers
sock_dir="$(mktemp -d)"
podman system service --time=0 "unix://$sock_dir/podman.sock" >/dev/null 2>&1 &
service_pid=$!
tc_name="$prefix-tc"
containers+=("$tc_name")
for _ in $(seq 1 100); do [[ -S "$sock_dir/podman.sock" ]] && break; sleep 0.1; done
if ! out="$(DOCKER_HOST="unix://$sock_dir/podman.sock" TESTCONTAINERS_RYUK_DISABLED=true \
        TESTCONTAINERS_CONNECTION_MODE=docker_host \
        "$PY" "$here/testcontainers_check.py" "$IMAGE" "$N" "$tc_name" 2>&1)"; then
    fail "$s" "$(echo "$out" | tail -4 | tr '\n' ' ')"
else
    pass "$s ($N records through the port Testcontainers mapped; $(echo "$out" | grep '^# container' | cut -c3-))"
fi
kill "$service_pid" 2>/dev/null
wait "$service_pid" 2>/dev/null
rm -rf "$sock_dir"
