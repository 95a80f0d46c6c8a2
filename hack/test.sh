#!/usr/bin/env bash
# test.sh: what `make test` runs (issue 26), stage by stage, each stage a
# make target, ending (on success and on failure) with a table of the stages:
# when each started, its wall and CPU time, and whether a build stage was
# cached. The records are in bin/test-stages.txt; `hack/test.sh table`
# prints the last run's table again.
#
# Four lanes, each running its stages in order; a stage that needs another
# lane's stage waits for it (a wait: step).
# - fg, the foreground: the critical path. It compiles lockguard's
#   dependencies (lint's go vet) and the first control plane, then runs the
#   suites that need only those, helm and Prometheus.
# - bg, background builds: what no fg stage compiles (the standard library,
#   first and while fg downloads modules; controller-gen and helm-docs; the
#   other versions' control planes, whose Kubernetes libraries are their
#   own versions), then, once lint has compiled what they share with
#   lockguard, helm (hack/tools) and Prometheus with promtool, beside the
#   first control plane; then chart-e2e's module (cert-manager), once the
#   first control plane is built too; last, at nice 19, the release's
#   packages for its other platforms (release-compile), for make
#   release-check. At the foreground's priority
#   (TEST_BG_NICE, 0): a cold run is bound by CPU (about 80 minutes of it
#   on 2 cores), so the lanes should share the cores and end together.
#   With the background at nice 10 the other control plane got the CPU
#   only once the foreground's suites ran, and the run ended with it and
#   its suites (a cold run of 83f29b9: the 1.29.15 control plane took 41
#   minutes of wall for 18 of CPU, and the run ended 13 minutes after the
#   foreground).
# - bt, background tests: go test ./... once the first control plane,
#   Prometheus and the generated files are ready, then the chart's installs
#   on every version once every control plane is built, beside the
#   foreground's suites.
# - bv: the chart on cert-manager (chart-e2e, its module compiled by bg
#   already), then the other versions' e2e suites, each once its control
#   plane is built (by bg; in a warm run, at once). The e2e suites mostly
#   wait (on leader elections, the garbage collector, a quiet minute), so a
#   third suite beside the other two costs little wall.
# Two go builds that compile the same packages at the same time would both
# compile them: bg compiles nothing that fg or bt compiles at the same
# time (fg waits for bg's standard library; helm and chart-e2e's module
# wait for the fg stages that compile what they share).
# TEST_LANES=1 runs every stage in the foreground, in the same order.
#
# Environment (the Makefile sets it): KUBE_VERSIONS, KUBE_VERSION,
# LOCKGUARD_KUBE_ASSETS, and TEST_OUTPUTS_<stage> (what a build stage makes,
# to tell whether it was cached).
set -euo pipefail
cd "$(dirname "$0")/.."
make=${MAKE:-make}
rec=$PWD/bin/test-stages.txt
logs=$PWD/bin/test-stages

fmt_dur() { local s=$1; if ((s >= 60)); then printf '%dm%02ds' $((s / 60)) $((s % 60)); else printf '%ds' "$s"; fi; }
row() { printf '  %-20s %-4s %7s %8s %8s  %s\n' "$@"; }

# table prints the last run's stages in the order they were planned.
table() {
  [ -f "$rec" ] || { echo "test.sh: no stages recorded in $rec" >&2; return 1; }
  local t0 now line name lane start
  t0=$(awk '$1 == "begin" {print $2}' "$rec")
  now=$(date +%s)
  echo
  echo "make test: its stages (start: into the run; cpu: user+system time of the stage's processes; bin/test-stages.txt)"
  row stage lane start wall cpu result
  while read -r -a line; do
    [ "${line[0]}" = plan ] || continue
    name=${line[1]} lane=${line[2]}
    start=$(awk -v n="$name" '$1 == "start" && $2 == n {print $3}' "$rec")
    read -r -a line <<< "$(awk -v n="$name" '$1 == "end" && $2 == n' "$rec")"
    if [ -z "$start" ]; then
      row "$name" "$lane" - - - "not run"
    elif [ ${#line[@]} = 0 ]; then
      row "$name" "$lane" "$(fmt_dur $((start - t0)))" "$(fmt_dur $((now - start)))" - "$(grep -q '^finish ' "$rec" && echo stopped || echo running)"
    else
      row "$name" "$lane" "$(fmt_dur $((start - t0)))" "$(fmt_dur $((line[2] - start)))" "$(fmt_dur "${line[3]}")" "${line[*]:4}"
    fi
  done < "$rec"
  read -r -a line <<< "$(awk '$1 == "finish"' "$rec")"
  [ ${#line[@]} = 0 ] ||
    row total "" "" "$(fmt_dur $((line[1] - t0)))" "$(fmt_dur "${line[2]}")" "${line[3]} ($(nproc) cores; load average at the end $(cut -d' ' -f1-3 /proc/loadavg))"
}

if [ "${1:-}" = table ]; then table; exit; fi

# cpu_of FILE: sets CPU to the user+system seconds of the children in the
# output of bash's times in FILE, and removes FILE.
cpu_of() {
  [ -f "$1" ] || { CPU=0; return; }
  CPU=$(awk 'NR == 2 {split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2]}' "$1")
  rm -f "$1"
}

# cpu_now sets CPU to the user+system seconds of this shell's finished
# children (times runs in this shell: in $(...) it would count a subshell's).
cpu_now() {
  times > "$logs/times.$BASHPID"
  cpu_of "$logs/times.$BASHPID"
}

declare -A ARGS OUTPUTS LANE
fg=() bg=() bt=() bv=()
# add LANE NAME OUTPUTS MAKE-ARGS...: plans stage NAME. OUTPUTS ("" for
# none) are the files a build stage makes: when all exist before it runs,
# the stage is "cached" (make had nothing to build).
add() {
  local lane=$1 name=$2
  LANE[$name]=$lane OUTPUTS[$name]=$3; shift 3; ARGS[$name]="$*"
  case $lane in bg) bg+=("$name") ;; bt) bt+=("$name") ;; bv) bv+=("$name") ;; *) fg+=("$name") ;; esac
}

# stage NAME: runs make with the stage's arguments and records it.
stage() {
  local name=$1 result=ok f
  if [ -n "${OUTPUTS[$name]}" ]; then
    result=cached
    for f in ${OUTPUTS[$name]}; do [ -e "$f" ] || result=built; done
  fi
  echo "start $name $(date +%s)" >> "$rec"
  echo "=== stage $name: make ${ARGS[$name]}"
  # In a subshell whose times count make's processes alone: this shell's
  # would also count the background lane's, whenever it is reaped.
  # shellcheck disable=SC2086 # ARGS are make's arguments, split on purpose.
  ("$make" --no-print-directory ${ARGS[$name]}; rc=$?; times > "$logs/times.$name"; exit $rc) || result=FAIL
  cpu_of "$logs/times.$name"
  echo "end $name $(date +%s) $CPU $result" >> "$rec"
  if [ "$result" = FAIL ]; then echo failed > "$logs/$name.done"; return 1; fi
  echo ok > "$logs/$name.done"
}

# wait_for NAME: waits until stage NAME has ended, prints the log of a
# background stage, and fails if the stage failed or never ran.
wait_for() {
  local name=$1
  while [ ! -f "$logs/$name.done" ]; do
    local lane=${LANE[$name]:-fg} pid
    pid=${lane_pid[$lane]:-}
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      [ -f "$logs/$name.done" ] || { echo "test.sh: the $lane lane stopped before $name" >&2; return 1; }
    fi
    sleep 2
  done
  if [ "${LANE[$name]:-fg}" != fg ] && [ "$BASHPID" = "$$" ] && [ -f "$logs/$name.log" ]; then
    echo "=== background stage $name ($(cat "$logs/$name.done")), its output:"
    cat "$logs/$name.log" && rm "$logs/$name.log"
  fi
  [ "$(cat "$logs/$name.done")" = ok ]
}

# run STEP...: a step is a stage, or wait:NAME. With one lane, waiting for a
# background stage runs it.
run() {
  local step
  for step in "$@"; do
    case $step in
      wait:*)
        step=${step#wait:}
        if [ "$lanes" = 1 ] && [ ! -f "$logs/$step.done" ]; then stage "$step"; else wait_for "$step"; fi ;;
      *) stage "$step" ;;
    esac
  done
}

read -r -a versions <<< "${KUBE_VERSIONS:?KUBE_VERSIONS must be set (make test sets it)}"
first=${KUBE_VERSION:-${versions[0]}}
others=()
for v in "${versions[@]}"; do [ "$v" = "$first" ] || others+=("$v"); done
lanes=${TEST_LANES:-3}
declare -A lane_pid
assets=${LOCKGUARD_KUBE_ASSETS:?LOCKGUARD_KUBE_ASSETS must be set (make test sets it)}
kube_out() { echo "$assets/v$1/kube-apiserver $assets/v$1/kube-controller-manager"; }

# The plan: each lane's steps in order.
add bg std "" std
add fg verify-tidy "" verify-tidy # downloads, while bg compiles std
fg+=(wait:std)
add fg lint "" lint
add bg codegen-tools "${TEST_OUTPUTS_codegen_tools:-}" controller-gen helm-docs
# etcd: built once, with the first version, in the foreground.
add fg "kube-$first" "$(kube_out "$first") $assets/etcd ${TEST_OUTPUTS_kubectl:-}" kube kubectl KUBE_VERSIONS="$first"
for v in "${others[@]}"; do
  add bg "kube-$v" "$(kube_out "$v")" kube KUBE_VERSIONS="$v" KUBE_ETCD=0
done
# helm once lint has compiled the packages it shares with lockguard
# (hack/tools), and Prometheus, which shares none, both beside the first
# control plane rather than after it; chart-e2e's module once lint and the
# first control plane have compiled what it shares with them.
bg+=(wait:lint)
add bg helm "${TEST_OUTPUTS_helm:-}" helm
add bg prometheus "${TEST_OUTPUTS_prometheus:-}" prometheus
bg+=("wait:kube-$first")
add bg chart-e2e-build "" chart-e2e-build
# Last, the release's other platforms (make release-check, after make test
# in .ci/run, then only links), at the lowest priority: on the CPU the
# suites leave idle while they wait on the API server. After build, which
# compiles linux/amd64's.
bg+=(wait:build)
add bg release-compile "" release-compile RELEASE_COMPILE_NICE=19
add fg build "" build
add fg image-check "" image-check IMAGE_ARCHES=amd64
fg+=(wait:helm)
add fg helm-lint "" helm-lint
fg+=(wait:codegen-tools)
# It may rewrite the chart's generated files: before any suite reads them.
add fg verify-generated "" verify-generated
add fg chaos-short "" chaos-short KUBE_VERSIONS="$first"
fg+=(wait:prometheus)
# The rules only: go test ./... (unit-packages) checks the dashboard.
add fg monitoring "" monitoring-rules
add fg "e2e-$first" "" e2e KUBE_VERSIONS="$first" KUBE_VERSION="$first"
# go test ./... (the unit tests and the in-process suite on the first
# version), then, once every control plane is built, the chart's installs
# on each (e2e/chart, build tag e2e).
bt+=(wait:verify-generated wait:prometheus)
add bt unit-packages "" unit-packages
for v in "${others[@]}"; do bt+=("wait:kube-$v"); done
add bt chart-installs "" chart-installs
# chart-e2e, then the other versions' e2e suites, each once its control
# plane is built.
bv+=(wait:verify-generated wait:prometheus wait:chart-e2e-build)
add bv chart-e2e "" chart-e2e KUBE_VERSIONS="$first"
for v in "${others[@]}"; do
  bv+=("wait:kube-$v")
  add bv "e2e-$v" "" e2e KUBE_VERSIONS="$v" KUBE_VERSION="$first"
done

mkdir -p "$logs"
rm -f "$logs"/*.done "$logs"/*.log
{
  echo "begin $(date +%s)"
  for n in "${fg[@]}" "${bg[@]}" "${bt[@]}" "${bv[@]}"; do
    case $n in wait:*) ;; *) echo "plan $n $([ "$lanes" = 1 ] && echo fg || echo "${LANE[$n]}")" ;; esac
  done
} > "$rec"

# Every process the run starts carries LOCKGUARD_TEST_RUN in its
# environment (the lockguard processes a test starts in process groups of
# their own, and the control planes, included), so that finish can stop
# what a stopped or failed stage left running.
export LOCKGUARD_TEST_RUN="$$-$(date +%s%N)"

# run_pids lists the live processes of this run other than test.sh and
# run_pids itself (its grep lists itself, gone once the loop runs).
run_pids() {
  local p
  for p in $(grep -lzx "LOCKGUARD_TEST_RUN=$LOCKGUARD_TEST_RUN" /proc/[0-9]*/environ 2> /dev/null | cut -d/ -f3); do
    [ "$p" != "$$" ] && [ "$p" != "$BASHPID" ] && kill -0 "$p" 2> /dev/null && echo "$p"
  done
  return 0
}

# reap stops what the run left: SIGTERM, then SIGKILL after 5 s.
reap() {
  local pids
  pids=$(run_pids)
  [ -n "$pids" ] || return 0
  kill $pids 2> /dev/null || true
  for _ in 1 2 3 4 5; do
    pids=$(run_pids)
    [ -n "$pids" ] || return 0
    sleep 1
  done
  echo "test.sh: stopping what the run left: $(ps -o pid=,comm= -p "${pids//$'\n'/,}" 2> /dev/null | tr -s ' \n' ' ')" >&2
  kill -9 $pids 2> /dev/null || true
}

finish() {
  local rc=$? f pid
  # A run a stage failed in, or that a signal stopped, never reports PASS.
  grep -q '^end .* FAIL$' "$rec" && [ "$rc" = 0 ] && rc=1
  for pid in "${lane_pid[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -- -"$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  reap
  # The output of background stages not shown yet (failed, or stopped).
  for f in "$logs"/*.log; do
    [ -e "$f" ] && { echo "=== background stage $(basename "$f" .log), its output:"; cat "$f"; }
  done
  cpu_now
  echo "finish $(date +%s) $CPU $([ "$rc" = 0 ] && echo PASS || echo FAIL)" >> "$rec"
  table || true
  exit "$rc"
}
trap finish EXIT
# Stopped by a signal: exit with its status (128 + its number), so that
# finish records FAIL rather than the status of the last command.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# start_lane LANE NICENESS STEP...: runs the lane in the background, in its
# own process group, so that a failure in the foreground stops it whole,
# NICENESS above make test's own.
start_lane() {
  local lane=$1 niceness=$2; shift 2
  set -m
  (
    renice -n $(($(nice) + niceness)) -p "$BASHPID" > /dev/null
    for step in "$@"; do
      case $step in
        wait:*) wait_for "${step#wait:}" ;;
        *) PROGRESS_INTERVAL=60 stage "$step" > "$logs/$step.log" 2>&1 ;;
      esac
    done
  ) &
  lane_pid[$lane]=$!
  set +m
}

if [ "$lanes" != 1 ]; then
  start_lane bg "${TEST_BG_NICE:-0}" "${bg[@]}"
  start_lane bt 0 "${bt[@]}"
  start_lane bv 0 "${bv[@]}"
fi
run "${fg[@]}"
for n in "${bg[@]}" "${bt[@]}" "${bv[@]}"; do case $n in wait:*) ;; *) run "wait:$n" ;; esac; done
for pid in "${lane_pid[@]}"; do wait "$pid"; done
