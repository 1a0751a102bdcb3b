# Sourced by ./run and ../cluster-txn/run (with $root, $cache and setup_fail set): Kafka's
# libraries (KAFKA_LIBS), the Java test clients (TXN_JAVA_CP), the franz-go ETL program
# (TXN_ETL_BIN, built from the Go module proxy once per source change) and kafkajs.
txn_dir="$root/protocol-tests/txn"
KAFKA_LIBS="${KAFKA_LIBS:-$("$root/scripts/kafka-fetch")}" || setup_fail "scripts/kafka-fetch failed"
export KAFKA_LIBS
TXN_JAVA_CP="$("$txn_dir/build-java")" || setup_fail "build-java failed"
export TXN_JAVA_CP

# the franz-go program, as protocol-tests/franz-go/run builds its own
command -v go >/dev/null || setup_fail "go not installed"
bin="$cache/bin/sluice-txn-etl"
stamp="$(cd "$txn_dir" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)"
if [[ ! -x "$bin" || "$(cat "$bin.src" 2>/dev/null)" != "$stamp" ]]; then
    echo "# building $bin (franz-go from the Go module proxy)" >&2
    mkdir -p "$cache/bin"
    tmp="$bin.tmp.$$"
    if ! (cd "$txn_dir" && GOFLAGS=-mod=mod go build -o "$tmp" .) >"$tmp.log" 2>&1; then
        msg="$(tail -n 5 "$tmp.log" | tr '\n' ' ' | cut -c1-300)"
        rm -f "$tmp" "$tmp.log"
        setup_fail "go build failed: $msg"
    fi
    rm -f "$tmp.log"
    mv -f "$tmp" "$bin"
    echo "$stamp" >"$bin.src"
fi
export TXN_ETL_BIN="$bin"
if [[ ! -f "$txn_dir/node_modules/kafkajs/package.json" ]]; then
    (cd "$txn_dir" && npm ci --no-audit --no-fund --loglevel=error) >&2 || setup_fail "npm ci failed"
fi
export KAFKAJS_NO_PARTITIONER_WARNING=1

