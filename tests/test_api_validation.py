"""Validation: every rule reports every problem with Kubernetes' path and words.

Each file under data/manifests/broken exercises one class of rules; the table below
is what Kubernetes' validation says for those inputs (same paths, except that map
keys are written ``.key``, and same messages).
"""

# ruff: noqa: E501  (the table holds Kubernetes' messages verbatim)

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubelet_kit.api import (
    Container,
    Pod,
    PodSpec,
    Probe,
    Quantity,
    ResourceRequirements,
    TCPSocketAction,
    load_manifests,
    load_pod,
    read_manifests,
    validate_pod,
)
from kubelet_kit.api.meta import ObjectMeta
from kubelet_kit.api.validation import is_dns1123_label, is_dns1123_subdomain, is_valid_port_name
from kubelet_kit.errors import ValidationError

BROKEN = Path(__file__).parent / "data" / "manifests" / "broken"

EXPECTED: dict[str, list[tuple[str, str]]] = {
    "enums.yaml": [
        (
            "spec.volumes[0].hostPath.type",
            'Unsupported value: "Folder": supported values: "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"',
        ),
        (
            "spec.volumes[1].emptyDir.medium",
            'Unsupported value: "Disk": supported values: "", "HugePages", "Memory"',
        ),
        (
            "spec.containers[0].imagePullPolicy",
            'Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never"',
        ),
        (
            "spec.containers[0].terminationMessagePolicy",
            'Unsupported value: "Stdout": supported values: "FallbackToLogsOnError", "File"',
        ),
        (
            "spec.containers[0].ports[0].protocol",
            'Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"',
        ),
        (
            "spec.containers[0].volumeMounts[0].mountPropagation",
            'Unsupported value: "Shared": supported values: "Bidirectional", "HostToContainer", "None"',
        ),
        (
            "spec.restartPolicy",
            'Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"',
        ),
        (
            "spec.dnsPolicy",
            'Unsupported value: "Bogus": supported values: "ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"',
        ),
    ],
    "env.yaml": [
        ("spec.containers[0].env[0].name", "Required value"),
        (
            "spec.containers[0].env[1].name",
            "Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
        ),
        (
            "spec.containers[0].env[2].valueFrom",
            'Invalid value: "": may not be specified when `value` is not empty',
        ),
        (
            "spec.containers[0].env[3].valueFrom",
            "Required value: must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
        ),
        (
            "spec.containers[0].env[4].valueFrom.fieldRef.fieldPath",
            'Unsupported value: "spec.hostname": supported values: "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"',
        ),
        (
            "spec.containers[0].env[5].valueFrom",
            'Invalid value: "": may not have more than one field specified at a time',
        ),
        ("spec.containers[0].env[5].valueFrom.configMapKeyRef.key", "Required value"),
        ("spec.containers[0].env[5].valueFrom.secretKeyRef.name", "Required value"),
        (
            "spec.containers[0].envFrom[0]",
            "Required value: must specify one of: `configMapRef` or `secretRef`",
        ),
    ],
    "image.yaml": [
        ("spec.initContainers[0].image", "Required value"),
        ("spec.containers[0].image", "Required value"),
        (
            "spec.containers[1].image",
            'Invalid value: " nginx": must not have leading or trailing whitespace',
        ),
    ],
    "multi.yaml[1]": [
        (
            "spec.restartPolicy",
            'Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"',
        ),
    ],
    "names.yaml": [
        (
            "metadata.name",
            "Invalid value: \"Web_1\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        ("metadata.namespace", 'Invalid value: "team.a": must not contain dots'),
        (
            "metadata.labels",
            "Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
        (
            "metadata.labels",
            "Invalid value: \"-bad-value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        (
            "spec.containers[0].name",
            "Invalid value: \"App\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
        ("spec.containers[1].name", 'Duplicate value: "app"'),
        ("spec.containers[2].name", "Required value"),
    ],
    "no-name.yaml": [
        ("metadata.name", "Required value: name or generateName is required"),
        ("spec.containers", "Required value"),
    ],
    "no-type-meta.yaml": [
        ("apiVersion", "Required value"),
        ("kind", "Required value"),
    ],
    "not-a-mapping.yaml": [
        ("", "Invalid value: [...]: expected an object, got a list"),
    ],
    "ports.yaml": [
        ("spec.containers[0].ports[1].name", 'Duplicate value: "http"'),
        (
            "spec.containers[0].ports[2].name",
            'Invalid value: "HTTP": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
        ),
        (
            "spec.containers[0].ports[2].name",
            'Invalid value: "HTTP": must contain at least one letter (a-z)',
        ),
        ("spec.containers[0].ports[2].containerPort", "Required value"),
        (
            "spec.containers[0].ports[3].name",
            'Invalid value: "a-very-long-port-name": must be no more than 15 characters',
        ),
        (
            "spec.containers[0].ports[3].containerPort",
            "Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
        (
            "spec.containers[0].ports[3].hostPort",
            "Invalid value: 65536: must be between 1 and 65535, inclusive",
        ),
        (
            "spec.containers[0].ports[4].name",
            'Invalid value: "123": must contain at least one letter (a-z)',
        ),
        (
            "spec.containers[0].ports[5].name",
            'Invalid value: "a--b": must not contain consecutive hyphens',
        ),
    ],
    "probes.yaml": [
        (
            "spec.initContainers[0].livenessProbe",
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
        (
            "spec.initContainers[0].lifecycle",
            "Forbidden: may not be set for init containers without restartPolicy=Always",
        ),
        ("spec.initContainers[1].startupProbe.successThreshold", "Invalid value: 3: must be 1"),
        ("spec.containers[0].restartPolicy", "Forbidden: may not be set for non-init containers"),
        ("spec.containers[0].livenessProbe", "Required value: must specify a handler type"),
        (
            "spec.containers[0].livenessProbe.initialDelaySeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "spec.containers[0].readinessProbe.httpGet",
            "Forbidden: may not specify more than 1 handler type",
        ),
        ("spec.containers[0].readinessProbe.exec.command", "Required value"),
        (
            "spec.containers[0].readinessProbe.httpGet.port",
            'Invalid value: "Not_A_Name": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)',
        ),
        (
            "spec.containers[0].readinessProbe.httpGet.scheme",
            'Unsupported value: "FTP": supported values: "HTTP", "HTTPS"',
        ),
        (
            "spec.containers[0].startupProbe.grpc.port",
            "Invalid value: 0: must be between 1 and 65535, inclusive",
        ),
        (
            "spec.containers[0].lifecycle.preStop.sleep.seconds",
            "Invalid value: 60: must be non-negative and less than terminationGracePeriodSeconds (30)",
        ),
    ],
    "quantities.yaml": [
        (
            "spec.containers[0].resources.limits.memory",
            "Invalid value: \"12Q\": quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        ),
        (
            "spec.containers[0].resources.requests.memory",
            'Invalid value: "-1Mi": must be greater than or equal to 0',
        ),
        (
            "spec.containers[0].resources.requests.gpu",
            'Invalid value: "gpu": must be a standard resource for containers',
        ),
        (
            "spec.containers[0].resources.requests.cpu",
            'Invalid value: "200m": must be less than or equal to cpu limit of 100m',
        ),
        (
            "spec.containers[1].resources.requests[example.com/dongle]",
            'Invalid value: "1": must be equal to example.com/dongle limit of 2',
        ),
    ],
    "syntax.json": [
        ("", "invalid JSON: Expecting property name enclosed in double quotes (line 2, column 29)"),
    ],
    "syntax.yaml": [
        ("", "invalid YAML: mapping values are not allowed in this context (line 5, column 10)"),
    ],
    "type-meta.yaml": [
        ("apiVersion", 'Unsupported value: "v2": supported values: "v1"'),
        ("kind", 'Unsupported value: "Deployment": supported values: "Pod"'),
    ],
    "types.yaml": [
        ("metadata.labels.version", "Invalid value: 2: expected a string, got an integer"),
        ("spec.volumes", "Invalid value: {...}: expected a list, got an object"),
        (
            "spec.containers[0].ports[0].containerPort",
            'Invalid value: "80": expected an integer, got a string',
        ),
        (
            "spec.containers[0].resources.limits",
            "Invalid value: [...]: expected an object, got a list",
        ),
        (
            "spec.containers[0].livenessProbe.httpGet.port",
            "Invalid value: 8.5: expected an integer or a string, got a number",
        ),
        ("spec.containers[0].stdin", 'Invalid value: "true": expected a boolean, got a string'),
        ("spec.containers[1]", 'Invalid value: "just-a-string": expected an object, got a string'),
        (
            "spec.terminationGracePeriodSeconds",
            'Invalid value: "thirty": expected an integer, got a string',
        ),
        ("spec.hostNetwork", 'Invalid value: "yes": expected a boolean, got a string'),
    ],
    "volumes.yaml": [
        ("spec.volumes[0]", "Required value: must specify a volume type"),
        ("spec.volumes[1].hostPath", "Forbidden: may not specify more than 1 volume type"),
        ("spec.volumes[2].name", 'Duplicate value: "two"'),
        ("spec.volumes[2].configMap.name", "Required value"),
        ("spec.volumes[3].secret.secretName", "Required value"),
        (
            "spec.volumes[3].secret.defaultMode",
            "Invalid value: 1024: must be a number between 0 and 0777 (octal), both inclusive",
        ),
        (
            "spec.volumes[3].secret.items[0].path",
            "Invalid value: \"../escape\": must not contain '..'",
        ),
        (
            "spec.volumes[3].secret.items[0].path",
            "Invalid value: \"../escape\": must not start with '..'",
        ),
        ("spec.volumes[4].persistentVolumeClaim.claimName", "Required value"),
        ("spec.containers[0].volumeMounts[0].name", 'Not found: "missing"'),
        (
            "spec.containers[0].volumeMounts[1].subPath",
            'Invalid value: "/etc/passwd": must be a relative path',
        ),
        ("spec.containers[0].volumeMounts[1].mountPath", 'Invalid value: "/a": must be unique'),
        (
            "spec.containers[0].volumeMounts[2].subPath",
            "Invalid value: \"a/../../b\": must not contain '..'",
        ),
        (
            "spec.containers[0].volumeMounts[3].subPathExpr",
            'Invalid value: "y": subPathExpr and subPath are mutually exclusive',
        ),
        ("spec.containers[0].volumeMounts[4].mountPath", "Required value"),
    ],
}


def _problems() -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for r in read_manifests(BROKEN):
        name = Path(r.source).name + (f"[{r.index}]" if r.index is not None else "")
        if r.errors:
            out.setdefault(name, []).extend((e.path, e.message) for e in r.errors)
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_manifest_reports_every_problem(name: str) -> None:
    assert _problems()[name] == EXPECTED[name]


def test_every_broken_file_is_in_the_table() -> None:
    assert sorted(_problems()) == sorted(EXPECTED)


def test_good_document_next_to_bad_one_still_loads() -> None:
    results = read_manifests(BROKEN / "multi.yaml")
    assert results[0].pod is not None and results[0].pod.name == "good"
    assert results[1].pod is None


def test_load_manifests_raises_with_every_document_problem() -> None:
    with pytest.raises(ValidationError) as info:
        load_manifests(BROKEN)
    paths = [e.path for e in info.value.errors]
    assert len(paths) == sum(len(v) for v in EXPECTED.values())
    assert f"{BROKEN / 'multi.yaml'}[1]: spec.restartPolicy" in paths


def test_load_pod_error_carries_source() -> None:
    with pytest.raises(ValidationError) as info:
        load_pod((BROKEN / "image.yaml").read_text(), source="image.yaml")
    assert info.value.source == "image.yaml"
    assert str(info.value).startswith("image.yaml: spec.initContainers[0].image: Required value")


# ----------------------------------------------------------------------------- helpers
# Upstream test tables (apimachinery pkg/util/validation validation_test.go).


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "012",
        "1a",
        "1-a",
        "1--a--b--2",
        "a" * 63,
    ],
)
def test_dns1123_label_good(value: str) -> None:
    assert is_dns1123_label(value) == []


@pytest.mark.parametrize(
    "value",
    [
        "",
        "A",
        "ABC",
        "aBc",
        "A1",
        "A-1",
        "1-A",
        "-",
        "a-",
        "-a",
        "1-",
        "-1",
        "_",
        "a_",
        "_a",
        "a_b",
        "1_",
        "_1",
        "1_2",
        ".",
        "a.",
        ".a",
        "a.b",
        "1.",
        ".1",
        "1.2",
        " ",
        "a ",
        " a",
        "a b",
        "1 ",
        " 1",
        "1 2",
        "a" * 64,
    ],
)
def test_dns1123_label_bad(value: str) -> None:
    assert is_dns1123_label(value) != []


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "012",
        "1a",
        "1-a",
        "1--a--b--2",
        "a.a",
        "ab.a",
        "abc.a",
        "a1.a",
        "a-1.a",
        "a--1--2--b.a",
        "a.1",
        "ab.1",
        "abc.1",
        "a1.1",
        "a-1.1",
        "a--1--2--b.1",
        "0.a",
        "01.a",
        "012.a",
        "1a.a",
        "1-a.a",
        "1--a--b--2",
        "0.1",
        "01.1",
        "012.1",
        "1a.1",
        "1-a.1",
        "1--a--b--2.1",
        "a.b.c.d.e",
        "aa.bb.cc.dd.ee",
        "1.2.3.4.5",
        "11.22.33.44.55",
        ("a" * 63 + ".") * 3 + "a" * 61,
    ],
)
def test_dns1123_subdomain_good(value: str) -> None:
    assert is_dns1123_subdomain(value) == []


@pytest.mark.parametrize(
    "value",
    [
        "",
        "A",
        "ABC",
        "aBc",
        "A1",
        "A-1",
        "1-A",
        "-",
        "a-",
        "-a",
        "1-",
        "-1",
        "_",
        "a_",
        "_a",
        "a_b",
        "1_",
        "_1",
        "1_2",
        ".",
        "a.",
        ".a",
        "a..b",
        "1.",
        ".1",
        "1..2",
        " ",
        "a ",
        " a",
        "a b",
        "1 ",
        " 1",
        "1 2",
        "A.a",
        "aB.a",
        "ab.A",
        "A1.a",
        "a1.A",
        "A.1",
        "aB.1",
        "A1.1",
        "1A.1",
        "0.A",
        "01.A",
        "012.A",
        "1A.a",
        "1a.A",
        "A.B.C.D.E",
        "AA.BB.CC.DD.EE",
        "a.B.c.d.e",
        "aa.bB.cc.dd.ee",
        "a@b",
        "a,b",
        "a_b",
        "a;b",
        "a:b",
        "a%b",
        "a?b",
        "a$b",
        "a" * 254,
    ],
)
def test_dns1123_subdomain_bad(value: str) -> None:
    assert is_dns1123_subdomain(value) != []


@pytest.mark.parametrize(
    "value", ["telnet", "re-mail-ck", "pop3", "a", "a-1", "1-a", "a-1-b-2-c", "1-a-2-b-3"]
)
def test_port_name_good(value: str) -> None:
    assert is_valid_port_name(value) == []


@pytest.mark.parametrize(
    "value",
    [
        "",
        "aAaAaAaAaAaAaAaAaAaAaAaAaAaAaAaA",
        "longerthan15characters",
        "12345",
        "1-2-3-4",
        "-begin",
        "end-",
        "two--hyphens",
        "whois++",
    ],
)
def test_port_name_bad(value: str) -> None:
    assert is_valid_port_name(value) != []


# ----------------------------------------------------------------------------- models in code


def _pod(*containers: Container, **spec: Any) -> Pod:
    return Pod(metadata=ObjectMeta(name="p"), spec=PodSpec(containers=containers, **spec))


def test_valid_pod_built_in_code_has_no_errors() -> None:
    assert validate_pod(_pod(Container(name="c", image="busybox"))) == []


def test_liveness_success_threshold_must_be_one() -> None:
    probe = Probe(tcp_socket=TCPSocketAction(port=80), success_threshold=2)
    pod = _pod(Container(name="c", image="i", liveness_probe=probe, readiness_probe=probe))
    assert [str(e) for e in validate_pod(pod)] == [
        "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1"
    ]


def test_requests_within_limits_is_fine_and_equal_is_fine() -> None:
    res = ResourceRequirements(
        limits={"cpu": Quantity.parse("1")}, requests={"cpu": Quantity.parse("1000m")}
    )
    assert validate_pod(_pod(Container(name="c", image="i", resources=res))) == []


def test_host_network_requires_matching_host_port() -> None:
    data = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "hostNetwork": True,
            "containers": [
                {"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 81}]}
            ],
        },
    }
    with pytest.raises(ValidationError) as info:
        load_pod(data)
    assert [str(e) for e in info.value.errors] == [
        "spec.containers[0].ports[0].hostPort: Invalid value: 81: must match `containerPort` "
        "when `hostNetwork` is true"
    ]


def test_sidecar_restart_policy_only_always() -> None:
    init = Container(name="i", image="i", restart_policy="OnFailure")
    pod = _pod(Container(name="c", image="i"), init_containers=(init,))
    assert [str(e) for e in validate_pod(pod)] == [
        'spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure": supported '
        'values: "Always"'
    ]


def test_evolve_then_validate() -> None:
    pod = _pod(Container(name="c", image="i"))
    bad = attrs.evolve(pod, spec=attrs.evolve(pod.spec, restart_policy="Sometimes"))
    assert [e.path for e in validate_pod(bad)] == ["spec.restartPolicy"]


# ----------------------------------------------------------------------------- robustness

_FIELD_NAMES = [
    "apiVersion",
    "kind",
    "metadata",
    "name",
    "namespace",
    "labels",
    "spec",
    "containers",
    "initContainers",
    "image",
    "ports",
    "containerPort",
    "resources",
    "limits",
    "requests",
    "cpu",
    "memory",
    "volumes",
    "emptyDir",
    "volumeMounts",
    "livenessProbe",
    "httpGet",
    "port",
    "env",
    "valueFrom",
    "fieldRef",
    "status",
    "containerStatuses",
    "state",
    "creationTimestamp",
    "restartPolicy",
]
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["v1", "Pod", "100m", "1Gi", "12Q", "Always", "/x", ".."]),
)
_json = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(_FIELD_NAMES), inner, max_size=5),
    ),
    max_leaves=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_loader_only_raises_validation_error(data: Any) -> None:
    try:
        pod = load_pod(data if isinstance(data, dict) else {"spec": data})
    except ValidationError as exc:
        assert exc.errors and all(e.message for e in exc.errors)
    else:
        json.dumps(pod.to_dict())  # a loaded pod always serializes


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=200))
def test_loader_text_only_raises_validation_error(text: str) -> None:
    try:
        pod = load_pod(text)
    except ValidationError as exc:
        assert exc.errors
    else:
        assert isinstance(pod, Pod)


def test_host_port_conflicts_across_containers() -> None:
    data = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {"name": "a", "image": "i", "ports": [{"containerPort": 80, "hostPort": 8080}]},
                {
                    "name": "b",
                    "image": "i",
                    "ports": [
                        {"containerPort": 81, "hostPort": 8080},
                        {"containerPort": 82, "hostPort": 8080, "protocol": "UDP"},
                    ],
                },
            ]
        },
    }
    with pytest.raises(ValidationError) as info:
        load_pod(data)
    assert [str(e) for e in info.value.errors] == [
        'spec.containers[1].ports[0].hostPort: Duplicate value: "/TCP/8080"'
    ]


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 3000 + "]" * 3000,
        '{"a": ' + "[" * 3000 + "]" * 3000 + "}",
        "spec: {containers: [" + "{a: " * 150 + "1" + "}" * 150 + "]}",
    ],
)
def test_deep_nesting_is_a_validation_error(text: str) -> None:
    with pytest.raises(ValidationError, match="nests deeper than 100 levels"):
        load_pod(text)


def test_yaml_alias_bomb_is_refused_quickly() -> None:
    lines = [
        "apiVersion: v1",
        "kind: Pod",
        "metadata:",
        "  name: p",
        "  annotations:",
        "    a0: &a0 [x, x, x, x, x, x, x, x, x, x]",
    ]
    for i in range(1, 9):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"    a{i}: &a{i} [{refs}]")
    with pytest.raises(ValidationError, match="holds more than 200000 values"):
        load_pod("\n".join(lines))
