"""Run the conformance suite's node specs against a one-node cluster.

Started by ``scripts/conformance`` inside namespaces of its own (see
:mod:`conformance.cluster`); ``python -m conformance.run --help`` lists the options.
It starts the cluster, runs the node set with ginkgo (the parallel part with
``--nodes`` workers, then the ``[Serial]`` specs alone), prints passed/total, each
failed spec and the wall time, keeps the junit reports and every component's log
in the output directory, and tears the cluster down.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from .cluster import Cluster, clean_env

#: The node set: the [Conformance] specs outside the other SIGs (149 in 1.20.2).
FOCUS = r"\[Conformance\]"
SKIP = r"\[sig-(api-machinery|apps|auth|cli|instrumentation|network|scheduling)\]"
#: Conformance specs of the other SIGs that are also node conformance: the four
#: "Networking Granular Checks: Pods" and the two Secrets-in-env specs.
NODE_CONFORMANCE = r"\[NodeConformance\]"
SERIAL = r"\[Serial\]"
#: The smoke subset (a few minutes with 4 workers): one or two quick specs of
#: each area a node serves, each pattern matching exactly one spec of the node set.
SMOKE = (
    r"Pods should get a host IP",
    r"Kubelet when scheduling a busybox command in a pod should print the output to logs",
    r"Pods should support remote command execution over websockets",
    r"Downward API volume should provide podname only",
    r"ConfigMap should be consumable from pods in volume \[NodeConformance\]",
    r"Probing container with readiness probe should not be ready before initial delay",
    r"InitContainer \[NodeConformance\] should invoke init containers on a RestartNever pod",
    r"should report termination message \[LinuxOnly\] if TerminationMessagePath is set as "
    r"non-root user",
    r"KubeletManagedEtcHosts should test kubelet managed /etc/hosts file",
    r"Security Context When creating a container with runAsUser should run the container "
    r"with uid 65534",
    r"Secrets should be consumable from pods in env vars",
    r"Variable Expansion should allow substituting values in a container's command",
    r"Container Lifecycle Hook when create a pod with lifecycle hook should execute "
    r"poststart http hook properly",
    r"Probing container should be restarted with a exec \"cat /tmp/health\" liveness probe",
    r"from log output if TerminationMessagePolicy FallbackToLogsOnError is set",
    r"Projected secret should be consumable from pods in volume as non-root with "
    r"defaultMode and fsGroup set",
    r"EmptyDir volumes should support \(non-root,0666,tmpfs\)",
    r"Downward API should provide pod name, namespace and IP address as env vars",
    r"with hostAliases should write entries to /etc/hosts",
    r"Docker Containers should be able to override the image's default command and "
    r"arguments",
)
SETS = ("all", "node", "nodeconformance", "smoke")

REPO = Path(__file__).resolve().parents[1]


def log(msg: str) -> None:
    stamp = datetime.datetime.now().strftime("%H:%M:%S")
    print(f"conformance {stamp}: {msg}", flush=True)


def e2e_args(cluster: Cluster, bin_dir: Path, report_dir: Path) -> list[str]:
    args = [
        f"--kubeconfig={cluster.admin_kubeconfig}",
        "--provider=skeleton",
        f"--kubectl-path={bin_dir / 'kubectl'}",
        f"--report-dir={report_dir}",
        "--allowed-not-ready-nodes=0",
        "--disable-log-dump",
    ]
    if cluster.registries is not None:
        # The private-registry spec's pull secret: the account of our gcr.io, in
        # place of upstream's service-account key for the real one.
        args.append(f"--docker-config-file={cluster.registries.docker_config}")
    return args


def junit_cases(report_dir: Path) -> dict[str, tuple[str, str]]:
    """Each spec in the junit files of ``report_dir``: name -> (state, message), state
    passed, failed or skipped; a spec any worker ran counts over one that skipped it."""
    rank = {"skipped": 0, "passed": 1, "failed": 2}
    cases: dict[str, tuple[str, str]] = {}
    for path in sorted(report_dir.glob("junit_*.xml")):
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("name", "")
            if case.find("failure") is not None or case.find("error") is not None:
                el = case.find("failure")
                if el is None:
                    el = case.find("error")
                text = (el.get("message") or el.text or "") if el is not None else ""
                state = ("failed", text.strip())
            elif case.find("skipped") is not None:
                state = ("skipped", "")
            else:
                state = ("passed", "")
            if name not in cases or rank[state[0]] > rank[cases[name][0]]:
                cases[name] = state
    return cases


def select(names: list[str], which: str) -> list[str]:
    """The specs of set ``which`` among the names of every ``[Conformance]`` and
    ``[NodeConformance]`` spec: ``node`` the node set (149 in 1.20.2), ``all`` the node
    set and the other SIGs' node-conformance specs (155), ``nodeconformance`` the
    ``[NodeConformance]`` specs without the ``[Conformance]`` tag (16), ``smoke`` the
    :data:`SMOKE` subset."""
    conformance = [n for n in names if re.search(FOCUS, n)]
    node_set = [n for n in conformance if not re.search(SKIP, n)]
    if which == "node":
        return node_set
    if which == "nodeconformance":
        return [n for n in names if re.search(NODE_CONFORMANCE, n) and n not in conformance]
    extra = [n for n in conformance if re.search(SKIP, n) and re.search(NODE_CONFORMANCE, n)]
    if which == "all":
        return sorted(node_set + extra)
    chosen = []
    for pattern in SMOKE:
        hits = [n for n in node_set + extra if re.search(pattern, n)]
        if len(hits) != 1:
            raise SystemExit(f"smoke pattern {pattern!r} matches {len(hits)} specs: {hits}")
        chosen.append(hits[0])
    return sorted(chosen)


def exact(names: list[str]) -> str:
    """A ginkgo focus matching exactly ``names`` (Go's regexp takes Python's escapes)."""
    return "|".join(re.escape(n) for n in names)


def list_specs(cluster: Cluster, bin_dir: Path, out: Path, focus: str, skip: str) -> list[str]:
    """The names of the specs ``focus`` and ``skip`` select (a ginkgo dry run)."""
    report = out / "junit" / "dry-run"
    report.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            str(bin_dir / "e2e.test"),
            "--ginkgo.dryRun",
            "--ginkgo.noColor",
            f"--ginkgo.focus={focus}",
            f"--ginkgo.skip={skip}",
            *e2e_args(cluster, bin_dir, report),
        ],
        stdout=(out / "dry-run.log").open("wb"),
        stderr=subprocess.STDOUT,
        env=clean_env(),
        timeout=600,
        check=False,
    )
    names = [n for n, (state, _) in junit_cases(report).items() if state != "skipped"]
    shutil.rmtree(report)
    return sorted(names)


def run_ginkgo(argv: list[str], logfile: Path, cluster: Cluster, verbose: bool) -> int:
    """Run ginkgo, its whole output to ``logfile``; the terminal gets a line per spec
    and the summary (everything with ``verbose``)."""
    log(f"{' '.join(argv[:3])} ... (the whole output: {logfile})")
    with logfile.open("w") as f:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=clean_env(),
            cwd=cluster.base,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            f.write(line)
            f.flush()
            if verbose:
                sys.stdout.write(line)
            elif line.startswith('{"msg":'):
                try:
                    msg = json.loads(line)["msg"]
                except (ValueError, KeyError):
                    msg = line.strip()
                print(f"  {msg}", flush=True)
            elif line.startswith(("Ran ", "SUCCESS!", "FAIL!")):
                print(f"  {line.strip()}", flush=True)
        return proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="scripts/conformance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--node",
        choices=("kubelet-kit", "real"),
        default="kubelet-kit",
        help="the node under test: kubelet-kit run (default) or the real "
        "kubelet 1.20.2, the control (scripts/conformance also takes "
        "both: the real kubelet, then kubelet-kit, then a table of both)",
    )
    ap.add_argument(
        "--set",
        choices=SETS,
        default="all",
        dest="spec_set",
        help="all: the node set and the other SIGs' [NodeConformance] "
        "conformance specs, 155 (default); node: the node set, 149; "
        "nodeconformance: the 16 [NodeConformance] specs without the "
        "[Conformance] tag; smoke: a subset of a few minutes touching "
        "every area",
    )
    ap.add_argument("--focus", help="only the selected specs whose name matches this regex")
    ap.add_argument("--nodes", type=int, default=4, help="parallel ginkgo workers (default 4)")
    ap.add_argument(
        "--out",
        type=Path,
        help="the output directory (default /tmp/kubelet-kit-conformance-NODE-TIME)",
    )
    ap.add_argument("--bin-dir", type=Path, required=True, help="scripts/kubernetes --bin-dir")
    ap.add_argument("--tree", type=Path, required=True, help="the Kubernetes source tree")
    ap.add_argument(
        "--keep-state",
        action="store_true",
        help="keep containerd's root and etcd's data in the output directory",
    )
    ap.add_argument(
        "-v", "--verbose", action="store_true", help="ginkgo's whole output on the terminal too"
    )
    args = ap.parse_args(argv)

    started = time.monotonic()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out: Path = (args.out or Path(f"/tmp/kubelet-kit-conformance-{args.node}-{stamp}")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "kubelet_kit"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    log(
        f"node {args.node}, commit {commit}{' (+ local changes)' if dirty else ''}, output in {out}"
    )
    bin_dir = args.bin_dir
    cluster = Cluster(out / "cluster", bin_dir, args.tree, args.node, REPO, log=log)
    results: dict[str, tuple[str, str]] = {}
    test_time = 0.0
    rc = 1
    try:
        cluster.start()
        log(f"cluster up in {time.monotonic() - started:.0f}s")
        selected = select(
            list_specs(cluster, bin_dir, out, f"{FOCUS}|{NODE_CONFORMANCE}", "^$"), args.spec_set
        )
        if args.focus:
            selected = [n for n in selected if re.search(args.focus, n)]
        serial = [n for n in selected if re.search(SERIAL, n)]
        log(f"{len(selected)} specs selected, {len(serial)} of them [Serial]")
        t0 = time.monotonic()
        ginkgo = str(bin_dir / "ginkgo")
        e2e = str(bin_dir / "e2e.test")
        if len(selected) > len(serial):
            report = out / "junit" / "parallel"
            report.mkdir(parents=True, exist_ok=True)
            nodes = max(1, min(args.nodes, len(selected) - len(serial)))
            parallel = [n for n in selected if n not in serial]
            run_ginkgo(
                [
                    ginkgo,
                    f"-nodes={nodes}",
                    "-noColor",
                    "-noisySkippings=false",
                    f"-focus={exact(parallel)}",
                    f"-skip={SERIAL}",
                    e2e,
                    "--",
                    *e2e_args(cluster, bin_dir, report),
                ],
                out / "ginkgo-parallel.log",
                cluster,
                args.verbose,
            )
            results.update({n: s for n, s in junit_cases(report).items() if n in selected})
        if serial:
            report = out / "junit" / "serial"
            report.mkdir(parents=True, exist_ok=True)
            run_ginkgo(
                [
                    ginkgo,
                    "-noColor",
                    "-noisySkippings=false",
                    f"-focus={exact(serial)}",
                    e2e,
                    "--",
                    *e2e_args(cluster, bin_dir, report),
                ],
                out / "ginkgo-serial.log",
                cluster,
                args.verbose,
            )
            results.update({n: s for n, s in junit_cases(report).items() if n in serial})
        test_time = time.monotonic() - t0
        for n in selected:
            results.setdefault(n, ("not run", ""))
        passed = sorted(n for n, (s, _) in results.items() if s == "passed")
        failed = sorted(n for n, (s, _) in results.items() if s != "passed")
        if not cluster.node_alive():
            log("the node process has exited: see its log")
        print()
        print(
            f"node: {args.node}   commit: {commit}{'+' if dirty else ''}   "
            f"date: {datetime.date.today().isoformat()}"
        )
        print(f"passed: {len(passed)}/{len(selected)}")
        for n in failed:
            state, msg = results[n]
            # The message's first line that is not a source location.
            lines = [ln.strip() for ln in msg.splitlines() if ln.strip()]
            first = next((ln for ln in lines if not ln.startswith("/")), "")[:200]
            print(f"  FAILED{' (' + state + ')' if state != 'failed' else ''}: {n}")
            if first:
                print(f"      {first}")
        print(
            f"wall time of the specs: {test_time / 60:.1f} min "
            f"(whole run {(time.monotonic() - started) / 60:.1f} min)"
        )
        print(f"junit reports: {out / 'junit'}; logs: {out / 'cluster' / 'logs'}")
        (out / "summary.json").write_text(
            json.dumps(
                {
                    "node": args.node,
                    "set": args.spec_set,
                    "focus": args.focus,
                    "workers": args.nodes,
                    "commit": commit,
                    "local_changes": bool(dirty),
                    "date": datetime.date.today().isoformat(),
                    "passed": len(passed),
                    "total": len(selected),
                    "spec_minutes": round(test_time / 60, 1),
                    "run_minutes": round((time.monotonic() - started) / 60, 1),
                    "failed": {n: results[n][1][:2000] for n in failed},
                },
                indent=1,
            )
        )
        rc = 0 if not failed and selected else 1
    except KeyboardInterrupt:
        log("interrupted")
        rc = 130
    finally:
        cluster.stop()
        for d in ("containerd/root", "containerd/state", "etcd"):
            if not args.keep_state:
                shutil.rmtree(cluster.base / d, ignore_errors=True)
        log("torn down")
    return rc


if __name__ == "__main__":
    if os.environ.get("KUBELET_KIT_CONFORMANCE_NS") != "1":
        sys.exit("conformance.run: start it with scripts/conformance (it makes the namespaces)")
    sys.exit(main())
