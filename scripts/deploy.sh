#!/usr/bin/env bash
# deploy.sh: deploys storage-scheduler (and with it storage-executor) through a
# Marathon-compatible launcher, as deployment-spec.md section 4.1 says.
#
# Usage: scripts/deploy.sh [--latest | --release TAG | --custom URL | --definition FILE] [OPTIONS]
#
# Which definition (packaging/):
#   --latest             storage-scheduler-latest.json: the latest release (default)
#   --release TAG        storage-scheduler-release.json with <release_tag> = TAG (vX.Y.Z)
#   --custom URL         storage-scheduler-custom.json with {custom_binary_url} = URL
#   --definition FILE    any definition, e.g. one written for the earlier ScaleIO framework
#
# Values (an option wins over its environment variable):
#   --launcher HOST[:PORT]  STORAGE_LAUNCHER         launcher, port 8080 unless given
#   --master HOST[:PORT]    STORAGE_MASTER           any Mesos master, port 5050 unless given
#   --release-url URL       STORAGE_RELEASE_URL      {release_url} of --latest and --release
#   --pd NAME               STORAGE_PROTECTION_DOMAIN
#   --pool NAME             STORAGE_POOL
#   --primary IP            STORAGE_PRIMARY_MDM
#   --secondary IP          STORAGE_SECONDARY_MDM
#   --tiebreaker IP         STORAGE_TIEBREAKER_MDM
#   --gateway IP            STORAGE_GATEWAY
#   (environment only)      STORAGE_GATEWAY_PASSWORD the gateway's admin password; never an
#                                                    option, so it stays out of process listings
#
# Other options:
#   --password-in-env    pass the password in the app's env (STORAGE_PASSWORD) instead of the
#                        -storage.password flag, so `ps` on the agent does not show it
#   --experimental       no pre-configured MDMs: drop the -storage.preconfig.* MDM flags and add
#                        -experimental=true (the framework builds the storage cluster)
#   --flag -NAME=VALUE   append a scheduler flag to cmd (repeatable)
#   --packages-url BASE  fill every storage package flag (-storage.<ubuntu14|rhel7>.<mdm|sds|
#                        sdc|lia|gw>) with BASE/<the vendor's file name> of --packages-version
#   --packages-version V the storage packages' version as the vendor's file names carry it
#                        (default 2.0-10000.2072, release 2.0.1-2072); also passed as
#                        -storage.version when given
#   --packages-sums FILE sha256sum output for those files (the .sha256 flags); a file not in
#                        it is refused unless --flag -storage.packages.unverified=true
#   --out FILE           write the filled definition to FILE (mode 600) and keep it
#   --dry-run            print the definition (password masked) and the curl command line; send nothing
#   -h, --help           this text
#
# A definition that still holds a placeholder (<...>, [...] or {...}) is refused, naming each.
# An app of that id already deployed (the launcher answers POST with 409) is updated: the same
# definition goes again with PUT /v2/apps/<id>, as Marathon updates an app, and a line says so
# with the update's deploymentId (the launcher restarts the scheduler with it; the new scheduler
# takes over the stored state and replaces older executors one at a time).
#
# Exit status: 0 when the launcher answers 2xx; 1 when it answers otherwise or cannot be
# reached (its message is printed); 2 for a usage error or an unfilled placeholder.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "deploy.sh: $*" >&2; exit 2; }

kind=latest tag="" custom="" definition=""
launcher="${STORAGE_LAUNCHER:-}" master="${STORAGE_MASTER:-}" release_url="${STORAGE_RELEASE_URL:-}"
pd="${STORAGE_PROTECTION_DOMAIN:-}" pool="${STORAGE_POOL:-}"
primary="${STORAGE_PRIMARY_MDM:-}" secondary="${STORAGE_SECONDARY_MDM:-}"
tiebreaker="${STORAGE_TIEBREAKER_MDM:-}" gateway="${STORAGE_GATEWAY:-}"
password_in_env=0 experimental=0 dry_run=0 out="" extra_flags=()
packages_url="" packages_version="" packages_sums=""
need() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --latest) kind=latest; shift ;;
    --release) need "$@"; kind=release tag="$2"; shift 2 ;;
    --custom) need "$@"; kind=custom custom="$2"; shift 2 ;;
    --definition) need "$@"; kind=file definition="$2"; shift 2 ;;
    --launcher) need "$@"; launcher="$2"; shift 2 ;;
    --master) need "$@"; master="$2"; shift 2 ;;
    --release-url) need "$@"; release_url="$2"; shift 2 ;;
    --pd) need "$@"; pd="$2"; shift 2 ;;
    --pool) need "$@"; pool="$2"; shift 2 ;;
    --primary) need "$@"; primary="$2"; shift 2 ;;
    --secondary) need "$@"; secondary="$2"; shift 2 ;;
    --tiebreaker) need "$@"; tiebreaker="$2"; shift 2 ;;
    --gateway) need "$@"; gateway="$2"; shift 2 ;;
    --flag) need "$@"; extra_flags+=("$2"); shift 2 ;;
    --packages-url) need "$@"; packages_url="$2"; shift 2 ;;
    --packages-version) need "$@"; packages_version="$2"; shift 2 ;;
    --packages-sums) need "$@"; packages_sums="$2"; shift 2 ;;
    --out) need "$@"; out="$2"; shift 2 ;;
    --password-in-env) password_in_env=1; shift ;;
    --experimental) experimental=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --password|--password=*) die "the password is read from STORAGE_GATEWAY_PASSWORD only (an option would show in process listings)" ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
if [ -z "$packages_url" ] && { [ -n "$packages_version" ] || [ -n "$packages_sums" ]; }; then
  die "--packages-version and --packages-sums go with --packages-url"
fi
[ -z "$packages_sums" ] || [ -r "$packages_sums" ] || die "--packages-sums $packages_sums: cannot read it"
case "$kind" in
  latest) template="$here/packaging/storage-scheduler-latest.json" ;;
  release)
    [[ "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] \
      || die "--release $tag: a release tag is v<major>.<minor>.<patch>"
    template="$here/packaging/storage-scheduler-release.json" ;;
  custom) template="$here/packaging/storage-scheduler-custom.json" ;;
  file) template="$definition"; [ -r "$template" ] || die "--definition $definition: cannot read it" ;;
esac
[ -n "$launcher" ] || die "--launcher (or STORAGE_LAUNCHER) is required: the launcher's host"
launcher="${launcher%/}"
# Port 8080 as in spec 4.1 unless one is given (the last colon-separated part is all digits).
[[ "$launcher" =~ :[0-9]+$ ]] || launcher="$launcher:8080"
command -v python3 >/dev/null || die "python3 is needed to fill in the JSON definition"
command -v curl >/dev/null || die "curl is needed to send the definition"

# The sent file holds the password: private, and removed on exit unless --out keeps it.
if [ -n "$out" ]; then
  body="$out"
  (umask 077; : > "$body") || die "--out $out: cannot write it"
else
  body="$(mktemp "${TMPDIR:-/tmp}/storage-scheduler-deploy.XXXXXX.json")"
fi
answer="$(mktemp)"
cleanup() { rm -f "$answer"; [ -n "$out" ] || [ "$dry_run" = 1 ] || rm -f "$body"; }
trap cleanup EXIT
chmod 600 "$body" "$answer"

# Filling is done by python's json module: every value is JSON-escaped and shell-quoted where
# it lands in cmd; nothing is pasted into JSON text by the shell. With --dry-run and no --out
# the written file carries the masked password, so nothing secret is left behind.
export KIND="$kind" TAG="$tag" CUSTOM="$custom" RELEASE_URL="$release_url" MASTER="$master" \
  PD="$pd" POOL="$pool" PRI="$primary" SEC="$secondary" TB="$tiebreaker" GW="$gateway" \
  PW_IN_ENV="$password_in_env" EXPERIMENTAL="$experimental" DRY="$dry_run" \
  PACKAGES_URL="$packages_url" PACKAGES_VERSION="$packages_version" PACKAGES_SUMS="$packages_sums" MASK="$([ "$dry_run" = 1 ] && [ -z "$out" ] && echo 1 || echo 0)"
python3 - "$template" "$body" "${extra_flags[@]}" <<'PY' || exit $?
import json, os, re, shlex, sys

template, body, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
e = os.environ
try:
    app = json.load(open(template, encoding="utf-8"))
except (OSError, ValueError) as err:
    print(f"deploy.sh: {template}: not a JSON app definition: {err}", file=sys.stderr)
    sys.exit(2)
if not isinstance(app, dict):
    print(f"deploy.sh: {template}: not a JSON app definition (an object)", file=sys.stderr)
    sys.exit(2)
password = e.get("STORAGE_GATEWAY_PASSWORD", "")
MASKED = "********"

master = e["MASTER"]
if master and not re.search(r":[0-9]+$", master):
    master += ":5050"

# placeholder -> (value, how to fill it). A value lands in cmd shell-quoted.
fills = {
    "{release_url}": (e["RELEASE_URL"].rstrip("/"), "--release-url URL or STORAGE_RELEASE_URL"),
    "<release_tag>": (e["TAG"], "--release TAG"),
    "{custom_binary_url}": (e["CUSTOM"].rstrip("/"), "--custom URL"),
    "<mesos_master_host>:5050": (master, "--master HOST or STORAGE_MASTER"),
    "<GATEWAY_PASSWORD>": (password, "the environment variable STORAGE_GATEWAY_PASSWORD"),
    "<PROTECTION_DOMAIN_NAME>": (e["PD"], "--pd NAME or STORAGE_PROTECTION_DOMAIN"),
    "<STORAGE_POOL_NAME>": (e["POOL"], "--pool NAME or STORAGE_POOL"),
    "<PRIMARY_MDM_IP>": (e["PRI"], "--primary IP or STORAGE_PRIMARY_MDM"),
    "<SECONDARY_MDM_IP>": (e["SEC"], "--secondary IP or STORAGE_SECONDARY_MDM"),
    "<TIEBREAKER_MDM_IP>": (e["TB"], "--tiebreaker IP or STORAGE_TIEBREAKER_MDM"),
    "<GATEWAY_IP>": (e["GW"], "--gateway IP or STORAGE_GATEWAY"),
}
hints = {k: how for k, (_, how) in fills.items()}

def package_files(version):
    """The vendor's file names (host-steps.md section 3) by flag, for both platforms."""
    out = {}
    for c in ("mdm", "sds", "sdc", "lia"):
        out[f"storage.ubuntu14.{c}"] = f"EMC-ScaleIO-{c}-{version}.Ubuntu.14.04.x86_64.deb"
    out["storage.ubuntu14.gw"] = f"emc-scaleio-gateway_{version}_amd64.deb"
    for c in ("mdm", "sds", "sdc", "lia"):
        out[f"storage.rhel7.{c}"] = f"EMC-ScaleIO-{c}-{version}.el7.x86_64.rpm"
    out["storage.rhel7.gw"] = f"EMC-ScaleIO-gateway-{version}.x86_64.rpm"
    return out

def package_flags(e, extra):
    """--packages-url: every storage package flag, with its digest from --packages-sums."""
    base = e["PACKAGES_URL"].rstrip("/")
    if not base:
        return []
    if not re.fullmatch(r"https?://[^\s'\"]+", base):
        print(f"deploy.sh: --packages-url {base!r}: not an http:// or https:// URL", file=sys.stderr)
        sys.exit(2)
    version = e["PACKAGES_VERSION"] or "2.0-10000.2072"
    if not re.fullmatch(r"[0-9][0-9A-Za-z.]*-[0-9][0-9A-Za-z.]*", version):
        print(f"deploy.sh: --packages-version {version!r}: not a package version like 2.0-10000.2072", file=sys.stderr)
        sys.exit(2)
    sums = {}
    if e["PACKAGES_SUMS"]:
        for line in open(e["PACKAGES_SUMS"], encoding="utf-8"):
            parts = line.split()
            if len(parts) == 2 and re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
                sums[parts[1].lstrip("*").rsplit("/", 1)[-1]] = parts[0].lower()
    unverified = any(re.fullmatch(r"--?(storage|scaleio)\.packages\.unverified(=true)?", f) for f in extra)
    flags, missing = [], []
    for flag, name in package_files(version).items():
        flags.append(f"-{flag}={shlex.quote(f'{base}/{name}')}")
        if name in sums:
            flags.append(f"-{flag}.sha256={sums[name]}")
        else:
            missing.append(name)
    if missing and not unverified:
        print("deploy.sh: --packages-url: no SHA-256 for " + ", ".join(missing) + " (give them in "
              "--packages-sums FILE, as sha256sum prints them, or install unchecked with "
              "--flag -storage.packages.unverified=true)", file=sys.stderr)
        sys.exit(2)
    if e["PACKAGES_VERSION"]:
        flags.append(f"-storage.version={version}")
    return flags
hints["<mesos_master_host>"] = hints["<mesos_master_host>:5050"]

def fill(text, in_cmd):
    for key, (value, _) in fills.items():
        if value and key in text:
            text = text.replace(key, shlex.quote(value) if in_cmd else value)
    return text

app["uris"] = [fill(u, False) if isinstance(u, str) else u for u in app.get("uris", [])]
cmd = app.get("cmd")
if isinstance(cmd, str):
    cmd = fill(cmd, True)
    if e["EXPERIMENTAL"] == "1":
        # The framework builds the MDM trio: no pre-configured MDM addresses.
        cmd = re.sub(r" -(storage|scaleio)\.preconfig\.(primary|secondary|tiebreaker)=\S+", "", cmd)
        cmd += " -experimental=true"
    if e["PW_IN_ENV"] == "1":
        # The scheduler reads STORAGE_PASSWORD when the flag is absent (issue 8).
        cmd = re.sub(r" -(storage|scaleio)\.password=\S+", "", cmd)
        if password:
            app.setdefault("env", {})["STORAGE_PASSWORD"] = password
        else:
            app.setdefault("env", {})["STORAGE_PASSWORD"] = "<GATEWAY_PASSWORD>"
    for flag in package_flags(e, extra):
        cmd += " " + flag
    for flag in extra:
        if not re.fullmatch(r"--?[A-Za-z0-9_.]+(=.*)?", flag, re.S):
            print(f"deploy.sh: --flag {flag!r}: not a -name=value flag", file=sys.stderr)
            sys.exit(2)
        name, sep, value = flag.partition("=")
        cmd += " " + name + (sep + shlex.quote(value) if sep else "")
    app["cmd"] = cmd

# Every string still holding a placeholder: <...>, [...] or {...} around words (an IPv6
# literal such as [::1] holds colons, so it is not one).
PLACEHOLDER = re.compile(r"<[A-Za-z0-9_ ./|-]+>|\[[A-Za-z0-9_ ./|-]+\]|\{[A-Za-z0-9_ ./|-]+\}")
def strings(v, path):
    if isinstance(v, str):
        yield path, v
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from strings(x, f"{path}/{i}")
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from strings(x, f"{path}/{k}")
left = []
for path, s in strings(app, ""):
    for m in PLACEHOLDER.finditer(s):
        # A filled value quoted into cmd (e.g. a password with brackets) is not a placeholder.
        if any(m.group(0) in v for v, _ in fills.values() if v):
            continue
        left.append((path, m.group(0)))
if left:
    print("deploy.sh: refusing to send a definition that still holds placeholders:", file=sys.stderr)
    where = {}
    for path, ph in left:
        where.setdefault(ph, []).append(path or "/")
    for ph, paths in where.items():
        how = hints.get(ph, "edit the definition file")
        print(f"deploy.sh:   {ph} (in {', '.join(paths)}): set it with {how}", file=sys.stderr)
    sys.exit(2)

text = json.dumps(app, indent=2) + "\n"
if password:
    masked = text.replace(json.dumps(password)[1:-1], MASKED).replace(shlex.quote(password), MASKED)
else:
    masked = text
with open(body, "w", encoding="utf-8") as f:
    f.write(masked if e["MASK"] == "1" else text)
if e["DRY"] == "1":
    sys.stdout.write(masked)
PY

url="$launcher/v2/apps"
if [ "$dry_run" = 1 ]; then
  echo "# dry run: nothing sent. The command deploy.sh would run (deployment-spec.md 4.1):"
  printf 'curl -k -XPOST -d @%s -H "Content-Type: application/json" %s\n' "$body" "$url"
  [ -n "$out" ] || echo "# $body holds the password masked; use --out FILE for a file you can send yourself"
  exit 0
fi

# The launcher's answer, password masked wherever it is echoed back.
summarize() {
  PW="${STORAGE_GATEWAY_PASSWORD:-}" python3 - "$answer" <<'PY'
import json, os, sys
raw = open(sys.argv[1], encoding="utf-8", errors="replace").read()
pw = os.environ["PW"]
if pw:
    raw = raw.replace(pw, "********").replace(json.dumps(pw)[1:-1], "********")
try:
    doc = json.loads(raw)
except ValueError:
    print(raw.strip()[:2000] or "(empty answer)"); sys.exit(0)
if isinstance(doc, dict) and "deployments" in doc and "id" in doc:
    ids = ", ".join(str(d.get("id", "?")) for d in doc.get("deployments", []) if isinstance(d, dict))
    print(f"app {doc.get('id')} version {doc.get('version', '?')} deployments [{ids}]")
elif isinstance(doc, dict) and "deploymentId" in doc:
    # Marathon's answer to a change of an app: the deployment started and the new version.
    print(f"deployment {doc.get('deploymentId')} version {doc.get('version', '?')}")
elif isinstance(doc, dict) and "message" in doc:
    # Marathon's error document: a message, and details per JSON path.
    parts = [str(doc["message"])]
    details = doc.get("details")
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict):
                parts.append(f"{d.get('path', '?')}: {'; '.join(map(str, d.get('errors', [])))}")
    elif details:
        parts.append(str(details))
    print(" | ".join(parts))
else:
    print(json.dumps(doc)[:4000])
PY
}
# One request with the definition; prints the HTTP status.
send() {
  curl -k -X"$1" -d @"$body" -H "Content-Type: application/json" "$2" \
    -sS -o "$answer" -w '%{http_code}' || { echo "deploy.sh: cannot reach the launcher at $launcher" >&2; exit 1; }
}

echo "deploy.sh: POST $url" >&2
status=$(send POST "$url")
if [ "$status" = 409 ]; then
  # The app exists: update it in place with the same definition (Marathon's PUT).
  app_id="$(python3 -c 'import json,sys; print(str(json.load(open(sys.argv[1])).get("id","")).strip("/"))' "$body")"
  [ -n "$app_id" ] || { echo "deploy.sh: the launcher answered 409 and the definition has no id to update" >&2; exit 1; }
  echo "deploy.sh: the launcher answered 409: $(summarize); updating it: PUT $url/$app_id" >&2
  status=$(send PUT "$url/$app_id")
  summary="$(summarize)"
  case "$status" in
    2??)
      deployment="$(python3 -c 'import json,sys
try: print(json.load(open(sys.argv[1])).get("deploymentId") or "?")
except Exception: print("?")' "$answer")"
      echo "deploy.sh: updated the existing app /$app_id (deploymentId $deployment): the launcher answered $status: $summary"
      exit 0 ;;
    *) echo "deploy.sh: updating /$app_id: the launcher answered $status: $summary" >&2; exit 1 ;;
  esac
fi
summary="$(summarize)"
case "$status" in
  2??) echo "deploy.sh: the launcher answered $status: $summary"; exit 0 ;;
  *) echo "deploy.sh: the launcher answered $status: $summary" >&2; exit 1 ;;
esac
