#!/usr/bin/env bash
# demo.sh: see the storage framework work on a local dev cluster, in one command.
#
# Usage: scripts/demo.sh [OPTIONS]
#
# Builds the binaries, starts the dev cluster (Mesos master and agents with Ubuntu 14.04 and
# RHEL 7 host stand-ins, the launcher, a storage gateway), serves the binaries from a local
# directory as a custom build, deploys them with scripts/deploy.sh exactly as an operator would,
# and follows the rollout on the scheduler's /api/state. Once every node runs it prints the
# status page URL, a summary per node and the operator commands to try (`storage-scheduler
# ctl`: plan status, pause, resume, a node restart, the events; the operator token it made is
# in the work dir) with the first one's answer, then keeps everything up until Ctrl-C, and
# stops everything it started.
#
# Options:
#   --agents N           agents (default 5), alternately Ubuntu 14.04 and RHEL 7 hosts
#   --experimental       start with an empty storage gateway: the framework builds the MDM trio
#   --exit-when-ready    exit 0 once every node runs; non-zero with the reason when a node
#                        fails or the timeout passes
#   --timeout SECS       how long --exit-when-ready waits for every node to run (default 180)
#   --ready-file PATH    once every node runs, write JSON there: the scheduler URL and the dev
#                        cluster's addresses (master, launcher, gateway, control, agents)
#   --work-dir DIR       where the cluster, the served binaries and the logs live (default: a
#                        new directory under the temp dir, removed unless the demo fails; a
#                        directory named here is always kept)
#   --bin-dir DIR        the dev cluster's binaries (storage-devcluster, storage-host-standin)
#                        already built in DIR, instead of running cargo build
#   --release-dir DIR    the storage-scheduler and storage-executor to deploy, already built
#                        in DIR (static release builds), instead of scripts/build-release.sh.
#                        The launcher holds the scheduler to the app's 32 MB, as Marathon on
#                        Mesos does, so a debug build (about 60 MB) is killed there.
#   -h, --help           this text
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "demo.sh: $*" >&2; exit 2; }

agents=5 experimental=0 exit_when_ready=0 timeout=180 ready_file="" work="" bin_dir=""
release_dir=""
need() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --agents) need "$@"; agents="$2"; shift 2 ;;
    --experimental) experimental=1; shift ;;
    --exit-when-ready) exit_when_ready=1; shift ;;
    --timeout) need "$@"; timeout="$2"; shift 2 ;;
    --ready-file) need "$@"; ready_file="$2"; shift 2 ;;
    --work-dir) need "$@"; work="$2"; shift 2 ;;
    --bin-dir) need "$@"; bin_dir="$2"; shift 2 ;;
    --release-dir) need "$@"; release_dir="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$agents" =~ ^[1-9][0-9]*$ ]] || die "--agents $agents: a positive number"
[[ "$timeout" =~ ^[1-9][0-9]*$ ]] || die "--timeout $timeout: a positive number of seconds"
command -v python3 >/dev/null || die "python3 is needed (JSON and the local file server)"
command -v curl >/dev/null || die "curl is needed"

log() { printf 'demo.sh: %s\n' "$*" >&2; }

# ---- build -------------------------------------------------------------------------------
if [ -z "$bin_dir" ]; then
  log "building the dev cluster (cargo build)"
  (cd "$here" && cargo build --quiet --bins -p storage-devcluster)
  bin_dir="$here/target/debug"
fi
for b in storage-devcluster storage-host-standin; do
  [ -x "$bin_dir/$b" ] || die "$bin_dir/$b missing (cargo build -p storage-devcluster)"
done
# What an operator deploys: the static release builds.
if [ -z "$release_dir" ]; then
  log "building the release binaries (scripts/build-release.sh)"
  "$here/scripts/build-release.sh" >/dev/null
  release_dir="$here/dist/last-build"
fi
for b in storage-scheduler storage-executor; do
  [ -x "$release_dir/$b" ] || die "$release_dir/$b missing (scripts/build-release.sh)"
done
# Absolute: the operator commands printed at the end name its storage-scheduler.
release_dir="$(cd "$release_dir" && pwd)"

# ---- everything started from here on is stopped by cleanup -------------------------------
own_work=0
if [ -z "$work" ]; then
  work="$(mktemp -d "${TMPDIR:-/tmp}/storage-demo.XXXXXX")" own_work=1
else
  mkdir -p "$work"
fi
work="$(cd "$work" && pwd)"
pids=()
status=1 keep=1
cleanup() {
  trap - EXIT INT TERM
  [ -t 1 ] && printf '\n'
  # The dev cluster stops what it started (launcher tasks: the scheduler; agents: executors)
  # on SIGTERM; the file server is ours.
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ "$keep" = 0 ] && [ "$own_work" = 1 ]; then
    rm -rf "$work"
  else
    log "logs kept in $work (devcluster.log; the scheduler's stderr is in its launcher sandbox)"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'status=130; cleanup' INT
trap 'status=143; cleanup' TERM

# Ubuntu 14.04 and RHEL 7 host stand-ins, alternating.
profiles="$(python3 -c 'import sys; n=int(sys.argv[1]); print(",".join(("ubuntu14","rhel7")[i%2] for i in range(n)))' "$agents")"
# A short agent ping timeout: an Ubuntu host's reboot (for its kernel) is away 6 of them,
# long enough for the master to mark its old agent unreachable before the new one registers.
dc_args=(--agents "$agents" --host-profile "$profiles" --heartbeat 2 --agent-ping-timeout 0.4
         --work-dir "$work/cluster" --ready-file "$work/devcluster.json")
[ "$experimental" = 1 ] && dc_args+=(--empty-gateway)
log "starting the dev cluster: $agents agents ($profiles)$([ "$experimental" = 1 ] && echo ', empty gateway (experimental)')"
"$bin_dir/storage-devcluster" "${dc_args[@]}" > "$work/devcluster.log" 2>&1 &
dc_pid=$!
pids+=("$dc_pid")

wait_file() {  # wait_file PATH PID WHAT: until PATH exists, while PID lives, up to 60 s.
  local deadline=$((SECONDS + 60))
  until [ -s "$1" ]; do
    kill -0 "$2" 2>/dev/null || { log "$3 exited:"; tail -n 20 "$work/$3.log" >&2; return 1; }
    [ "$SECONDS" -lt "$deadline" ] || { log "$3 not ready after 60 s"; return 1; }
    sleep 0.1
  done
}
wait_file "$work/devcluster.json" "$dc_pid" devcluster
json() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@"; }
master="$(json "$work/devcluster.json" 'd["master"]')"
launcher="$(json "$work/devcluster.json" 'd["launcher"]')"
gateway="$(json "$work/devcluster.json" 'd["gateway"].split("://")[-1]')"

# The binaries, served from a local directory: a custom build ({custom_binary_url}).
mkdir -p "$work/www"
cp "$release_dir/storage-scheduler" "$release_dir/storage-executor" "$work/www/"
python3 - "$work/www" "$work/www.port" > "$work/fileserver.log" 2>&1 <<'PY' &
import functools, http.server, os, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(sys.argv[2] + ".tmp", "w") as f:
    f.write(str(server.server_port))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
server.serve_forever()
PY
pids+=("$!")
wait_file "$work/www.port" "$!" fileserver
custom_url="http://127.0.0.1:$(cat "$work/www.port")"

# The storage and volume-driver packages, named as the vendor names them, served next to the binaries: the
# host stand-ins accept these names (tests/devcluster/packages.txt, the one list: the tests
# and benches stage the same set), each with its SHA-256, and the executor downloads, checks
# and installs them as on a real host.
package_flags=()
while read -r flag file; do
  printf 'stand-in package %s\n' "$file" > "$work/www/$file"
  digest=$(sha256sum "$work/www/$file") && digest=${digest%% *}
  package_flags+=(--flag "-$flag=$custom_url/$file" --flag "-$flag.sha256=$digest")
done < "$here/tests/devcluster/packages.txt"

# ---- deploy, as an operator would ---------------------------------------------------------
# What a careful operator gives beside the required flags: a store that outlives the
# scheduler's sandbox (a relaunch starts in a new one; here a journal in the work dir, on a
# cluster a durable path or ZooKeeper), and the scoped gateway user REX-Ray logs in as. Every
# password stays out of process listings: the admin's in the app's environment
# (--password-in-env), REX-Ray's in a file only its owner reads.
mkdir -p "$work/state"
(umask 077 && python3 -c 'import secrets; print(secrets.token_urlsafe(18))' > "$work/state/rexray.password")
# The operator token the REST API's writes (pause, restart, ...) ask for, in a file only its
# owner reads, as the scheduler's flag and the operators' client both want it.
token_file="$work/state/operator.token"
(umask 077 && python3 -c 'import secrets; print(secrets.token_urlsafe(24))' > "$token_file")
deploy_args=(--custom "$custom_url" --launcher "$launcher" --master "$master"
             --pd default --pool default --gateway 127.0.0.1 --password-in-env
             --flag "-storage.lbgateway=$gateway"
             --flag "-store.uri=$work/state/storage-scheduler.journal"
             --flag "-rexray.username=rexray-volumes"
             --flag "-rexray.password.file=$work/state/rexray.password"
             --flag "-rest.operator.token.file=$token_file"
             "${package_flags[@]}")
if [ "$experimental" = 1 ]; then
  deploy_args+=(--experimental)
else
  deploy_args+=(--primary 127.0.0.1 --secondary 127.0.0.2 --tiebreaker 127.0.0.3)
fi
log "deploying: scripts/deploy.sh ${deploy_args[*]}"
STORAGE_GATEWAY_PASSWORD=Scaleio123 "$here/scripts/deploy.sh" "${deploy_args[@]}" >&2

# ---- follow the rollout -------------------------------------------------------------------
# scripts/demo_follow.py prints the live progress line, and on its last line the outcome:
# `ready <scheduler url>`, `failed <reason>` or `timeout <reason>`.
follow_timeout=$([ "$exit_when_ready" = 1 ] && echo "$timeout" || echo 0)
outcome="$(python3 "$here/scripts/demo_follow.py" follow "$launcher" "$agents" "$follow_timeout" \
  "$([ -t 2 ] && echo 1 || echo 0)")"
verdict="${outcome%% *}" detail="${outcome#* }"
case "$verdict" in
  ready) ;;
  failed) log "rollout failed: $detail"; status=1; exit 1 ;;
  timeout) log "not ready: $detail"; status=1; exit 1 ;;
  *) log "lost track of the rollout: ${outcome:-the follower ended without an outcome}"; status=1; exit 1 ;;
esac

# ---- every node runs ----------------------------------------------------------------------
# The operators' client against this scheduler: its https address (the same port), the
# certificate its log names at start (newest first: a relaunch makes a new one), the token.
operator_commands() {
  local https="https://${scheduler#*://}" log fp host ctl
  log="$(find "$work/cluster/launcher" -name stderr -type f -printf '%T@ %p\n' 2>/dev/null \
         | sort -rn | cut -d' ' -f2- | xargs -r grep -l 'REST server on .*certificate sha256:' \
         | head -n 1 || true)"
  fp="$([ -n "$log" ] && grep 'REST server on ' "$log" | grep -o 'certificate sha256:[0-9a-f]*' \
        | tail -n 1 | sed 's/^certificate //' || true)"
  host="$(python3 -c 'import json,sys,urllib.request as u
nodes = json.load(u.urlopen(sys.argv[1] + "/api/state", timeout=5))["model"]["nodes"]
print(sorted(n["hostname"] for n in nodes.values())[0])' "$scheduler" || echo '<host>')"
  ctl="$release_dir/storage-scheduler ctl"
  echo "operator commands to try (writes read the token from $token_file):"
  echo "  export STORAGE_SCHEDULER_URL=$https STORAGE_SCHEDULER_FINGERPRINT=${fp:-<sha256:... as the scheduler log names it>}"
  echo "  $ctl status"
  echo "  $ctl -token.file=$token_file pause"
  echo "  $ctl -token.file=$token_file resume"
  echo "  $ctl -token.file=$token_file restart $host"
  echo "  $ctl events"
  # The first of them, run now: the client, the address and the certificate work.
  [ -z "$fp" ] || STORAGE_SCHEDULER_URL="$https" STORAGE_SCHEDULER_FINGERPRINT="$fp" \
    "$release_dir/storage-scheduler" ctl status 2>&1 | sed 's/^/  now: /' \
    || log "storage-scheduler ctl status failed (above)"
}
scheduler="$detail"
echo "status page: $scheduler/"
python3 "$here/scripts/demo_follow.py" summary "$scheduler"
operator_commands
[ -z "$ready_file" ] || python3 "$here/scripts/demo_follow.py" ready-file "$work/devcluster.json" "$scheduler" "$ready_file"
status=0 keep=0
if [ "$exit_when_ready" = 1 ]; then
  exit 0
fi
log "running; Ctrl-C stops everything"
wait "$dc_pid" || true
log "the dev cluster stopped"
status=1
