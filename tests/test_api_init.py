"""kubelet_kit.api's exports stay honest."""

from __future__ import annotations

import importlib
import inspect

import attrs

import kubelet_kit.api as api
from kubelet_kit.api.serde import Model

_MODEL_MODULES = ("meta", "pod", "status")


def test_all_names_exist() -> None:
    for name in api.__all__:
        assert hasattr(api, name), name
    assert sorted(api.__all__) == sorted(set(api.__all__))


def test_every_model_is_exported() -> None:
    for mod_name in _MODEL_MODULES:
        mod = importlib.import_module(f"kubelet_kit.api.{mod_name}")
        for name in mod.__all__:
            assert hasattr(mod, name), f"{mod_name}.{name}"
            obj = getattr(mod, name)
            if inspect.isclass(obj) and issubclass(obj, Model):
                assert name in api.__all__, f"{mod_name}.{name} not re-exported"


def test_every_model_is_a_frozen_attrs_class_with_defaults() -> None:
    for mod_name in _MODEL_MODULES:
        mod = importlib.import_module(f"kubelet_kit.api.{mod_name}")
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.isclass(obj) and issubclass(obj, Model):
                assert attrs.has(obj) and obj.__setattr__ is not object.__setattr__, name
                obj()  # every field has a default: a model can always be built empty


def test_to_dict_of_empty_models_is_plain_json() -> None:
    assert api.Pod().to_dict() == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": "default"},
        "spec": {
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "enableServiceLinks": True,
        },
        "status": {},
    }
