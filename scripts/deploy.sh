#!/usr/bin/env bash
# Deploys storage-scheduler (and with it storage-executor) through a Marathon-compatible
# launcher: fills in packaging/storage-scheduler.json and POSTs it to <launcher>:8080/v2/apps.
#
#   scripts/deploy.sh --launcher HOST[:PORT] --master HOST[:PORT] --base URL \
#     --pd NAME --pool NAME --primary IP --secondary IP --tiebreaker IP --gateway IP
#
# The gateway password is read from the environment (STORAGE_GATEWAY_PASSWORD), never from
# the command line, so that it does not show in process listings. --base is the URL the two
# binaries are downloaded from: `{release_url}/<release_tag>` or `{custom_binary_url}`.
# --dry-run prints the definition (password masked) instead of sending it.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
template="$here/packaging/storage-scheduler.json"

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
die() { echo "deploy.sh: $*" >&2; exit 2; }

launcher="" master="" base="" pd="" pool="" primary="" secondary="" tiebreaker="" gateway=""
dry_run=0 loglevel=debug
while [ $# -gt 0 ]; do
  case "$1" in
    --launcher) launcher="${2:-}"; shift 2 ;;
    --master) master="${2:-}"; shift 2 ;;
    --base) base="${2:-}"; shift 2 ;;
    --pd) pd="${2:-}"; shift 2 ;;
    --pool) pool="${2:-}"; shift 2 ;;
    --primary) primary="${2:-}"; shift 2 ;;
    --secondary) secondary="${2:-}"; shift 2 ;;
    --tiebreaker) tiebreaker="${2:-}"; shift 2 ;;
    --gateway) gateway="${2:-}"; shift 2 ;;
    --loglevel) loglevel="${2:-}"; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
for v in launcher master base pd pool primary secondary tiebreaker gateway; do
  [ -n "${!v}" ] || die "--$v is required"
done
password="${STORAGE_GATEWAY_PASSWORD:-}"
[ -n "$password" ] || die "set STORAGE_GATEWAY_PASSWORD to the storage gateway's admin password"
case "$launcher" in *:*) ;; *) launcher="$launcher:8080" ;; esac
case "$master" in *:*) ;; *) master="$master:5050" ;; esac

# Build the definition with python's json module: every value is JSON-escaped, none is
# pasted into JSON text by the shell.
definition="$(BASE="$base" MASTER="$master" PD="$pd" POOL="$pool" PRI="$primary" SEC="$secondary" \
  TB="$tiebreaker" GW="$gateway" PW="$password" LOGLEVEL="$loglevel" DRY="$dry_run" \
  python3 - "$template" <<'PY'
import json, os, shlex, sys
app = json.load(open(sys.argv[1]))
e = os.environ
base = e["BASE"].rstrip("/")
app["uris"] = [base + "/storage-scheduler", base + "/storage-executor"]
pw = "********" if e["DRY"] == "1" else e["PW"]
flags = [
    "-loglevel=" + e["LOGLEVEL"], "-rest.port=$PORT", "-uri=" + e["MASTER"],
    "-storage.password=" + pw, "-storage.protectiondomain=" + e["PD"],
    "-storage.storagepool=" + e["POOL"], "-storage.preconfig.primary=" + e["PRI"],
    "-storage.preconfig.secondary=" + e["SEC"], "-storage.preconfig.tiebreaker=" + e["TB"],
    "-storage.preconfig.gateway=" + e["GW"],
]
# $PORT must stay expandable by the launcher's shell; everything else is quoted literally.
quoted = [f if f == "-rest.port=$PORT" else shlex.quote(f) for f in flags]
app["cmd"] = "chmod u+x storage-scheduler && ./storage-scheduler " + " ".join(quoted)
print(json.dumps(app, indent=2))
PY
)"

if [ "$dry_run" = 1 ]; then
  printf '%s\n' "$definition"
  exit 0
fi
# The body goes through a private temporary file (it holds the password), removed on exit;
# so does the answer, which echoes the definition back.
body="$(mktemp)"
answer="$(mktemp)"
trap 'rm -f "$body" "$answer"' EXIT
chmod 600 "$body" "$answer"
printf '%s' "$definition" > "$body"
echo "deploy.sh: POST http://$launcher/v2/apps" >&2
status=$(curl -sS -k -XPOST -H 'Content-Type: application/json' -d @"$body" \
  -o "$answer" -w '%{http_code}' "http://$launcher/v2/apps") || die "cannot reach the launcher at $launcher"
# Show what the launcher said, with the password masked wherever it is echoed.
summary="$(PW="$password" python3 - "$answer" <<'PY'
import json, os, sys
raw = open(sys.argv[1], encoding="utf-8", errors="replace").read()
raw = raw.replace(os.environ["PW"], "********") if os.environ["PW"] else raw
try:
    doc = json.loads(raw)
except ValueError:
    print(raw.strip()[:2000]); sys.exit(0)
if isinstance(doc, dict) and "deployments" in doc:
    ids = ", ".join(d.get("id", "?") for d in doc.get("deployments", []))
    print(f"app {doc.get('id')} version {doc.get('version', '?')} deployments [{ids}]")
else:
    print(json.dumps(doc, indent=2)[:4000])
PY
)"
case "$status" in
  201) echo "deploy.sh: $summary" >&2; echo "deploy.sh: created (201)"; exit 0 ;;
  409) echo "deploy.sh: an app with this id already exists (409): $summary" >&2; exit 1 ;;
  *) echo "deploy.sh: the launcher answered $status: $summary" >&2; exit 1 ;;
esac
