#!/usr/bin/env python3
"""Checks the Kubernetes manifests here: every file parses as YAML, every
document is a Kubernetes object (apiVersion, kind, metadata.name) or a CDI
spec (cdiVersion, kind vendor/class, devices with names and container
edits), and the files agree with each other and with gshare:

  - the CDI spec's LD_PRELOAD is a file it mounts, and its GSHARE_DIR a
    directory it mounts at the same path as on the host;
  - the DaemonSet installs the library at that host path and prepares that
    region directory;
  - each pod's cdi.k8s.io annotation names a device of the CDI spec;
  - each pod that sets LD_PRELOAD itself mounts the library and the region
    directory at the same paths as on the host;
  - every GSHARE_* name used is one of gshare's (base/options.cpp's table);
  - the time-slicing ConfigMap's embedded configuration parses and gives
    nvidia.com/gpu at least 2 replicas.

usage: check_manifests.py [DIRECTORY]   (default: this script's directory)
Exit 77 (skipped) without PyYAML (Debian: python3-yaml).
"""
import os
import re
import sys

try:
    import yaml
except ImportError:
    print("SKIPPED: PyYAML is not installed (Debian: python3-yaml)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
OPTIONS_SOURCE = os.path.join(HERE, "..", "..", "base", "options.cpp")

problems = []


def problem(where, text):
    problems.append(f"{where}: {text}")


def gshare_variables():
    with open(OPTIONS_SOURCE) as f:
        return set(re.findall(r'\{\{"(GSHARE_[A-Z0-9_]+)"', f.read()))


def check_kubernetes_object(where, doc):
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            problem(where, f"no {key}")
    if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
        problem(where, "no metadata.name")


def check_cdi_spec(where, doc):
    if not isinstance(doc.get("cdiVersion"), str):
        problem(where, "cdiVersion is not a string")
    if not re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[a-zA-Z0-9_.-]+", str(doc.get("kind", ""))):
        problem(where, f"kind {doc.get('kind')!r} is not vendor/class")
    devices = doc.get("devices")
    if not isinstance(devices, list) or not devices:
        problem(where, "no devices")
        return
    for device in devices:
        if not isinstance(device, dict) or not device.get("name") or \
                not isinstance(device.get("containerEdits"), dict):
            problem(where, f"device {device!r} has no name or containerEdits")


def env_of(entries):
    """A CDI env list (NAME=value) or a container's env (name/value) as a dict."""
    env = {}
    for entry in entries or []:
        if isinstance(entry, str) and "=" in entry:
            name, value = entry.split("=", 1)
            env[name] = value
        elif isinstance(entry, dict) and "name" in entry:
            env[entry["name"]] = entry.get("value")
    return env


def main():
    directory = sys.argv[1] if len(sys.argv) > 1 else HERE
    known = gshare_variables()
    if len(known) < 10:
        problem(OPTIONS_SOURCE, f"found only {len(known)} GSHARE_* names in the options table")
    documents = []  # (where, document)
    files = sorted(f for f in os.listdir(directory) if f.endswith((".yaml", ".yml")))
    if not files:
        problem(directory, "no manifests")
    for name in files:
        path = os.path.join(directory, name)
        try:
            with open(path) as f:
                loaded = list(yaml.safe_load_all(f))
        except yaml.YAMLError as e:
            problem(name, f"does not parse: {e}")
            continue
        for index, doc in enumerate(loaded):
            if doc is None:
                continue
            where = f"{name} document {index + 1}"
            if not isinstance(doc, dict):
                problem(where, "is not a mapping")
                continue
            if "cdiVersion" in doc:
                check_cdi_spec(where, doc)
            else:
                check_kubernetes_object(where, doc)
            documents.append((where, doc))
        print(f"{name}: {len(loaded)} document(s)")

    # Every GSHARE_* name anywhere in the manifests is one of gshare's.
    for where, doc in documents:
        for used in set(re.findall(r"GSHARE_[A-Z0-9_]+", yaml.safe_dump(doc))):
            if used not in known:
                problem(where, f"{used} is not a gshare variable")

    try:
        check_together(directory, documents)
    except (KeyError, TypeError, AttributeError) as e:
        problem(directory, f"a manifest lacks what a DaemonSet, Pod or ConfigMap has: {e!r}")
    for text in problems:
        print(f"FAIL: {text}")
    if not problems:
        print(f"PASS: {len(documents)} documents in {len(files)} files")
    return 1 if problems else 0


def check_together(directory, documents):
    """The files against each other: paths, device names, replicas."""
    cdi = [(w, d) for w, d in documents if "cdiVersion" in d]
    if len(cdi) != 1:
        problem(directory, f"wanted one CDI spec, found {len(cdi)}")
        return
    cdi_where, spec = cdi[0]
    device_names = {f"{spec['kind']}={d['name']}" for d in spec["devices"]}
    edits = spec["devices"][0]["containerEdits"]
    cdi_env = env_of(edits.get("env"))
    mounts = {m.get("containerPath"): m.get("hostPath") for m in edits.get("mounts", [])}
    library, regions = cdi_env.get("LD_PRELOAD"), cdi_env.get("GSHARE_DIR")
    if not library or mounts.get(library) is None:
        problem(cdi_where, f"LD_PRELOAD {library!r} is not a file it mounts")
    if not regions or mounts.get(regions) != regions:
        problem(cdi_where, f"GSHARE_DIR {regions!r} is not mounted at the host's path")

    daemonsets = [(w, d) for w, d in documents if d.get("kind") == "DaemonSet"]
    if len(daemonsets) != 1:
        problem(directory, f"wanted one DaemonSet, found {len(daemonsets)}")
    for where, ds in daemonsets:
        pod = ds["spec"]["template"]["spec"]
        host_paths = {v["hostPath"]["path"] for v in pod.get("volumes", []) if "hostPath" in v}
        script = yaml.safe_dump(pod.get("initContainers", []))
        if regions not in host_paths:
            problem(where, f"does not prepare the region directory {regions}")
        if library and mounts.get(library) and \
                not any(mounts[library].startswith(p + "/") for p in host_paths):
            problem(where, f"does not install {mounts[library]} on the node")
        if "/etc/cdi" not in host_paths or "gshare.yaml" not in script:
            problem(where, "does not install the CDI spec in /etc/cdi")
        if ds["spec"]["selector"]["matchLabels"].items() - \
                ds["spec"]["template"]["metadata"]["labels"].items():
            problem(where, "its selector does not match its pods' labels")

    pods = [(w, d) for w, d in documents if d.get("kind") == "Pod"]
    if not pods:
        problem(directory, "no example pod")
    for where, pod in pods:
        annotations = pod["metadata"].get("annotations") or {}
        asked = [v.strip() for k, v in annotations.items() if k.startswith("cdi.k8s.io/")
                 for v in str(v).split(",")]
        for device in asked:
            if device not in device_names:
                problem(where, f"asks for CDI device {device}, not in {sorted(device_names)}")
        volumes = {v["name"]: v for v in pod["spec"].get("volumes", [])}
        for container in pod["spec"]["containers"]:
            env = env_of(container.get("env"))
            if not asked and "LD_PRELOAD" not in env:
                problem(where, f"container {container['name']} gets no preload")
            if "LD_PRELOAD" in env:
                mounted = {m["mountPath"]: volumes.get(m["name"], {}).get("hostPath", {}).get("path")
                           for m in container.get("volumeMounts", [])}
                for path in (env["LD_PRELOAD"], env.get("GSHARE_DIR")):
                    if mounted.get(path) != path:
                        problem(where, f"container {container['name']} does not mount {path} "
                                       "from the same path on the host")

    slicing = [(w, d) for w, d in documents
               if d.get("kind") == "ConfigMap" and "time-slicing" in d["metadata"]["name"]]
    if not slicing:
        problem(directory, "no time-slicing ConfigMap")
    for where, config_map in slicing:
        for key, text in (config_map.get("data") or {}).items():
            try:
                config = yaml.safe_load(text)
                resources = config["sharing"]["timeSlicing"]["resources"]
                replicas = {r["name"]: r["replicas"] for r in resources}
            except (yaml.YAMLError, KeyError, TypeError) as e:
                problem(where, f"data.{key} is not a device plugin configuration: {e!r}")
                continue
            if not isinstance(replicas.get("nvidia.com/gpu"), int) or \
                    replicas["nvidia.com/gpu"] < 2:
                problem(where, f"data.{key} does not share nvidia.com/gpu: {replicas}")


if __name__ == "__main__":
    sys.exit(main())
