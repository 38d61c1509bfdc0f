#!/usr/bin/env python3
"""Checks charts/ex2d: helm lint, helm template of the default values and of every
charts/ex2d/ci/*.yaml, and the properties the fleet depends on in what is rendered.

  check_chart.py --source-dir DIR [--reader BIN --worker BIN --writer BIN --ctl BIN --ex2d BIN]

Exit 0 when every check passes, 1 with the failures listed, 77 (ctest SKIP) without helm.
helm is looked for in $EX2D_HELM, PATH, /opt/ex2d-tools/bin and ~/.cache/ex2d/bin
(tools/fetch-helm installs it). With the binaries and redis-server, the rendered ConfigMap is
also given to the real services (--print-config) and the rendered Redis configuration and ACL
users carry one simulated exposure through a real fleet.
"""
import argparse
import base64
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import test_ports

try:
    import yaml
except ImportError:  # python3-yaml comes with .ci/install-deps --tests
    print("SKIP: python3 yaml module missing (apt-get install python3-yaml)")
    sys.exit(77)

RELEASE = "rel"
FULLNAME = "rel-ex2d"
ROLES = ("reader", "worker", "writer")
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def find_helm():
    candidates = [os.environ.get("EX2D_HELM", ""), shutil.which("helm") or "",
                  "/opt/ex2d-tools/bin/helm", os.path.expanduser("~/.cache/ex2d/bin/helm")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def deep_merge(base, over):
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def flatten(d, prefix=""):
    keys = {}
    for k, v in d.items():
        if isinstance(v, dict):
            keys.update(flatten(v, prefix + k + "."))
        else:
            keys[prefix + k] = v
    return keys


def render(helm, chart, values_files=(), sets=()):
    cmd = [helm, "template", RELEASE, chart, "--namespace", "ex2d-test"]
    for f in values_files:
        cmd += ["-f", f]
    for s in sets:
        cmd += ["--set", s]
    return run(cmd)


def index(docs):
    by = {}
    for d in docs:
        by[(d["kind"], d["metadata"]["name"])] = d
    return by


def pod_checks(case, name, role, pod, values, cfg, auth):
    """Properties every fleet pod (and the ctl job's pod) must have."""
    where = f"{case}: {name}"
    check(pod.get("enableServiceLinks") is False,
          f"{where}: enableServiceLinks must be false (service env vars EX2D_*_PORT break the config)")
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, f"{where}: pod securityContext.runAsNonRoot is not true")
    tmp_volumes = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    secret_volumes = {v["name"]: v["secret"] for v in pod.get("volumes", []) if "secret" in v}
    gpu = values["worker"]["gpu"]["resourceName"]
    for c in pod["containers"]:
        csc = c.get("securityContext", {})
        check(csc.get("readOnlyRootFilesystem") is True, f"{where}/{c['name']}: readOnlyRootFilesystem is not true")
        check(csc.get("allowPrivilegeEscalation") is False, f"{where}/{c['name']}: allowPrivilegeEscalation is not false")
        check("ALL" in csc.get("capabilities", {}).get("drop", []), f"{where}/{c['name']}: capabilities do not drop ALL")
        mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
        check("/tmp" in mounts and mounts["/tmp"]["name"] in tmp_volumes, f"{where}/{c['name']}: no emptyDir at /tmp")
        res = c.get("resources", {})
        check("memory" in res.get("requests", {}) and "memory" in res.get("limits", {}),
              f"{where}/{c['name']}: memory requests and limits are required")
        check(gpu not in res.get("requests", {}), f"{where}/{c['name']}: {gpu} must only be under limits")
        want_gpu = role == "worker" and values["worker"]["backend"] == "cuda"
        has_gpu = gpu in res.get("limits", {})
        check(has_gpu == want_gpu, f"{where}/{c['name']}: {gpu} limit {'missing' if want_gpu else 'present'} "
                                   f"with backend {values['worker']['backend']}")
        if has_gpu:
            check(int(res["limits"][gpu]) == int(values["worker"]["gpu"]["count"]), f"{where}: GPU count")
        env = {e["name"]: e for e in c.get("env", [])}
        for e in c.get("env", []):
            check("secretKeyRef" not in json.dumps(e.get("valueFrom", {})),
                  f"{where}/{c['name']}: env {e['name']} comes from a Secret; secrets must be files")
            check("PASSWORD" not in e["name"] or e["name"].endswith("_FILE"),
                  f"{where}/{c['name']}: env {e['name']} looks like a password value")
        check(env.get("EX2D_CONFIG", {}).get("value") == "/etc/ex2d/ex2d.yaml"
              and mounts.get("/etc/ex2d/ex2d.yaml", {}).get("readOnly") is True,
              f"{where}/{c['name']}: the ConfigMap is not mounted at EX2D_CONFIG")
        if auth:
            pw_file = env.get("EX2D_REDIS_PASSWORD_FILE", {}).get("value", "")
            check(env.get("EX2D_REDIS_USER", {}).get("value") == f"ex2d-{role}",
                  f"{where}: EX2D_REDIS_USER is not ex2d-{role} (the users of tools/ex2d-redis-acl)")
            mount = mounts.get(os.path.dirname(pw_file))
            ok = mount is not None and mount["name"] in secret_volumes
            if check(ok, f"{where}: {pw_file} is not on a Secret volume"):
                sv = secret_volumes[mount["name"]]
                items = sv.get("items", [])
                check(len(items) == 1 and items[0]["key"] == role and items[0]["path"] == os.path.basename(pw_file),
                      f"{where}: mounts {items} of the auth Secret, not only its own key {role}")
                check(sv.get("defaultMode", 0o644) & 0o007 == 0, f"{where}: the password file is world-readable")
        else:
            check("EX2D_REDIS_PASSWORD_FILE" not in env, f"{where}: password file without redis.auth")
        if role in ("reader", "writer"):
            check(env.get("EX2D_ZMQ_BIND", {}).get("value") == f"tcp://$(POD_IP):{values['ports']['zmq']}",
                  f"{where}: readers and writers must bind the pod IP (what they advertise)")
        if role != "ctl":
            # The images set EX2D_SERVICE_HTTP_PORT themselves: the pod must set its own.
            check(env.get("EX2D_SERVICE_HTTP_PORT", {}).get("value") == str(values["ports"]["http"]),
                  f"{where}: EX2D_SERVICE_HTTP_PORT is not ports.http")
        curve = values["curve"]["enabled"] and role != "ctl"
        key_file = env.get("EX2D_ZMQ_CURVE_SECRET_KEY_FILE", {}).get("value", "")
        allowed = env.get("EX2D_ZMQ_CURVE_ALLOWED_KEYS", {}).get("value", "")
        check(bool(key_file) == curve and bool(allowed) == curve, f"{where}: CURVE environment with curve.enabled={curve}")
        if curve:
            vols = {v["name"]: v for v in pod.get("volumes", [])}
            km = mounts.get(os.path.dirname(key_file))
            check(km is not None and vols[km["name"]].get("secret", {}).get("secretName") == values["curve"]["secrets"][role],
                  f"{where}: the CURVE secret key is not from Secret curve.secrets.{role}")
            am = mounts.get(allowed)
            check(am is not None and vols[am["name"]].get("configMap", {}).get("name") == values["curve"]["allowedKeys"][role],
                  f"{where}: the allowed keys are not ConfigMap curve.allowedKeys.{role}")


def check_render(case, docs, values, chart_dir, source_dir, alerts, dashboard):
    by = index([d for d in docs if d])
    kinds = {}
    for kind, name in by:
        kinds.setdefault(kind, set()).add(name)
    auth = values["redis"]["auth"]["enabled"]

    # The configuration every process reads.
    cm = by.get(("ConfigMap", f"{FULLNAME}-config"))
    if not check(cm is not None, f"{case}: ConfigMap {FULLNAME}-config missing"):
        return None
    cfg = yaml.safe_load(cm["data"]["ex2d.yaml"])
    defaults = yaml.safe_load(open(os.path.join(source_dir, "config/ex2d.yaml")))
    check(set(flatten(cfg)) == set(flatten(defaults)),
          f"{case}: ConfigMap keys differ from config/ex2d.yaml: extra "
          f"{sorted(set(flatten(cfg)) - set(flatten(defaults)))}, missing {sorted(set(flatten(defaults)) - set(flatten(cfg)))}")
    check(cfg["service"]["http_host"] == "0.0.0.0", f"{case}: service.http_host must be 0.0.0.0 in pods")
    check(cfg["service"]["http_port"] == values["ports"]["http"] and cfg["service"]["http_port"] > 0,
          f"{case}: service.http_port must be the fixed ports.http")
    check(cfg["redis"]["password"] == "", f"{case}: a Redis password in the ConfigMap")
    check(cfg["worker"]["backend"] == values["worker"]["backend"], f"{case}: worker.backend not passed on")
    check(cfg["zmq"]["allow_plaintext"] == (not values["curve"]["enabled"]),
          f"{case}: zmq.allow_plaintext must be true exactly when CURVE is off")
    drain = float(cfg["service"]["drain_timeout_s"])

    # Fleet Deployments.
    for role in ROLES:
        name = f"{FULLNAME}-{role}"
        dep = by.get(("Deployment", name))
        if not check(dep is not None, f"{case}: Deployment {name} missing"):
            continue
        spec = dep["spec"]
        if role == "worker" and values["keda"]["enabled"]:
            check("replicas" not in spec, f"{case}: {name} sets replicas although KEDA owns them")
        else:
            check(spec.get("replicas") == values[role]["replicas"], f"{case}: {name} replicas {spec.get('replicas')}")
        pod = spec["template"]["spec"]
        check(float(pod["terminationGracePeriodSeconds"]) > drain,
              f"{case}: {name} grace {pod['terminationGracePeriodSeconds']} s not above drain {drain} s")
        c = pod["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
        check(ports.get("http") == cfg["service"]["http_port"], f"{case}: {name} http port differs from the config")
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
            get = c.get(probe, {}).get("httpGet", {})
            check(get.get("path") == path and get.get("port") in ("http", cfg["service"]["http_port"]),
                  f"{case}: {name} {probe} is not GET {path} on the HTTP port")
        ann = spec["template"]["metadata"].get("annotations", {})
        if values["monitoring"]["scrapeAnnotations"]:
            check(ann.get("prometheus.io/scrape") == "true" and ann.get("prometheus.io/port") == str(cfg["service"]["http_port"]),
                  f"{case}: {name} scrape annotations")
        check("checksum/config" in ann, f"{case}: {name} does not roll on configuration changes")
        pod_checks(case, name, role, pod, values, cfg, auth)
        if role == "worker":
            check(pod.get("hostIPC", False) == values["worker"]["hostIPC"], f"{case}: worker hostIPC")

    # The ex2dctl job.
    jobs = [d for d in docs if d and d["kind"] == "Job"]
    check(bool(jobs) == values["ctl"]["submit"]["enabled"], f"{case}: ctl Job presence")
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        pod_checks(case, job["metadata"]["name"], "ctl", pod, values, cfg, auth)
        check(pod["containers"][0]["args"] == values["ctl"]["submit"]["args"], f"{case}: ctl Job args")

    # Redis: in the chart with AOF and noeviction on a claim, or external.
    sts = by.get(("StatefulSet", f"{FULLNAME}-redis"))
    if values["redis"]["enabled"]:
        if check(sts is not None, f"{case}: Redis StatefulSet missing"):
            conf = by[("ConfigMap", f"{FULLNAME}-redis")]["data"]["redis.conf"]
            check(re.search(r"^appendonly yes$", conf, re.M) is not None, f"{case}: Redis without AOF")
            check(re.search(r"^maxmemory-policy noeviction$", conf, re.M) is not None, f"{case}: Redis may evict")
            check(bool(sts["spec"].get("volumeClaimTemplates")), f"{case}: Redis data not on a PersistentVolumeClaim")
            check(("aclfile" in conf) == auth, f"{case}: Redis ACL file iff redis.auth.enabled")
            rpod = sts["spec"]["template"]["spec"]
            check(rpod["securityContext"].get("runAsNonRoot") is True, f"{case}: Redis runs as root")
            for c in rpod["containers"] + rpod.get("initContainers", []):
                check(c["securityContext"].get("readOnlyRootFilesystem") is True, f"{case}: Redis {c['name']} root filesystem writable")
                check("memory" in c.get("resources", {}).get("limits", {}), f"{case}: Redis {c['name']} without memory limit")
        check(("Service", f"{FULLNAME}-redis") in by, f"{case}: Redis Service missing")
        check(cfg["redis"]["host"] == f"{FULLNAME}-redis", f"{case}: redis.host is {cfg['redis']['host']}")
    else:
        check(sts is None, f"{case}: a Redis StatefulSet with redis.enabled false")
        check(cfg["redis"]["host"] == values["redis"]["external"]["host"]
              and cfg["redis"]["port"] == values["redis"]["external"]["port"], f"{case}: external Redis address")
    secret_name = values["redis"]["auth"]["existingSecret"] or f"{FULLNAME}-redis-auth"
    made = by.get(("Secret", f"{FULLNAME}-redis-auth"))
    check((made is not None) == (auth and not values["redis"]["auth"]["existingSecret"]),
          f"{case}: auth Secret made by the chart iff auth without existingSecret")
    if made:
        want_keys = {"reader", "worker", "writer", "ctl"} | ({"keda"} if values["keda"]["enabled"] else set())
        check(set(made["data"]) == want_keys, f"{case}: auth Secret keys {sorted(made['data'])}")
        check(all(len(base64.b64decode(v)) >= 16 for v in made["data"].values()), f"{case}: empty or short generated passwords")

    # KEDA.
    so = [d for d in docs if d and d["kind"] == "ScaledObject"]
    if values["keda"]["enabled"]:
        if check(len(so) == 1, f"{case}: one ScaledObject expected, found {len(so)}"):
            s = so[0]
            check(s["apiVersion"] == "keda.sh/v1alpha1", f"{case}: ScaledObject apiVersion")
            check(s["spec"]["scaleTargetRef"]["name"] == f"{FULLNAME}-worker", f"{case}: ScaledObject target")
            check(s["spec"]["minReplicaCount"] == values["keda"]["minReplicaCount"], f"{case}: minReplicaCount")
            ns = cfg["redis"]["namespace"]
            want = ([f"{ns}:jobs:nightly"] if values["keda"]["nightly"] else []) + \
                   [f"{ns}:jobs:campaign:{c}" for c in values["keda"]["campaigns"]]
            triggers = s["spec"]["triggers"]
            lag = [t for t in triggers if "lagCount" in t["metadata"]]
            check(sorted(t["metadata"]["stream"] for t in lag) == sorted(want),
                  f"{case}: lag triggers on {[t['metadata']['stream'] for t in lag]}, want {want}")
            for t in triggers:
                m = t["metadata"]
                check(t["type"] == "redis-streams" and m["consumerGroup"] == "readers", f"{case}: trigger {m}")
                check(all(isinstance(v, str) for v in m.values()), f"{case}: KEDA metadata values must be strings: {m}")
                if auth:
                    check(m.get("username") == "ex2d-keda" and "password" not in m
                          and t.get("authenticationRef", {}).get("name") == f"{FULLNAME}-redis",
                          f"{case}: trigger authentication {t}")
            if auth:
                ta = by.get(("TriggerAuthentication", f"{FULLNAME}-redis"))
                if check(ta is not None, f"{case}: TriggerAuthentication missing"):
                    ref = ta["spec"]["secretTargetRef"][0]
                    check(ref["name"] == secret_name and ref["key"] == "keda"
                          and ref["parameter"] == "password", f"{case}: TriggerAuthentication {ref}")
    else:
        check(not so and "TriggerAuthentication" not in kinds, f"{case}: KEDA objects with keda.enabled false")

    # Disruption budgets and network policies.
    if values["podDisruptionBudget"]["enabled"]:
        for role in ROLES:
            pdb = by.get(("PodDisruptionBudget", f"{FULLNAME}-{role}"))
            if check(pdb is not None, f"{case}: PodDisruptionBudget of {role} missing"):
                check(pdb["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component") == role, f"{case}: PDB selector")
    if values["networkPolicy"]["enabled"]:
        fleet = by.get(("NetworkPolicy", f"{FULLNAME}-fleet"))
        if check(fleet is not None, f"{case}: fleet NetworkPolicy missing"):
            rules = fleet["spec"]["ingress"]
            own = [r for r in rules if "ports" not in r]
            check(len(own) == 1 and own[0]["from"][0]["podSelector"]["matchLabels"].get("app.kubernetes.io/instance") == RELEASE,
                  f"{case}: fleet pods must accept all ports only from the release's pods")
            prom = [r for r in rules if "ports" in r]
            check(len(prom) == 1 and prom[0]["ports"][0]["port"] == "http" and "namespaceSelector" in prom[0]["from"][0],
                  f"{case}: the Prometheus namespace may reach only the HTTP port")
        rnp = by.get(("NetworkPolicy", f"{FULLNAME}-redis"))
        check((rnp is not None) == values["redis"]["enabled"], f"{case}: Redis NetworkPolicy iff in-chart Redis")
        if rnp:
            peers = rnp["spec"]["ingress"][0]["from"]
            check(peers[0]["podSelector"]["matchLabels"].get("app.kubernetes.io/instance") == RELEASE
                  and len(peers) == (2 if values["keda"]["enabled"] else 1), f"{case}: Redis reachable by {peers}")

    # Monitoring objects carry the files of the chart unchanged.
    pr = [d for d in docs if d and d["kind"] == "PrometheusRule"]
    check(bool(pr) == values["monitoring"]["prometheusRule"]["enabled"], f"{case}: PrometheusRule presence")
    for r in pr:
        check(r["spec"] == alerts, f"{case}: PrometheusRule differs from files/ex2d-alerts.yaml")
    pm = [d for d in docs if d and d["kind"] == "PodMonitor"]
    check(bool(pm) == values["monitoring"]["podMonitor"]["enabled"], f"{case}: PodMonitor presence")
    for m in pm:
        check(m["spec"]["podMetricsEndpoints"][0]["port"] == "http", f"{case}: PodMonitor port")
    dash = by.get(("ConfigMap", f"{FULLNAME}-dashboard"))
    if check((dash is not None) == values["monitoring"]["grafanaDashboard"]["enabled"], f"{case}: dashboard presence") and dash:
        check(json.loads(dash["data"]["ex2d.json"]) == dashboard, f"{case}: dashboard ConfigMap differs from dashboards/ex2d.json")
    rules_cm = by.get(("ConfigMap", f"{FULLNAME}-alerts"))
    if rules_cm:
        check(yaml.safe_load(rules_cm["data"]["ex2d-alerts.yaml"]) == alerts, f"{case}: rules ConfigMap differs")
    return cfg


def exported_metrics(metrics_cpp):
    names = set(re.findall(r'\.Name\("(ex2d_[a-z_]+)"\)', open(metrics_cpp).read()))
    hist = {n for n in names if n == "ex2d_stage_seconds"}
    for h in hist:
        names |= {h + "_bucket", h + "_sum", h + "_count"}
    return names


def check_metric_names(text, known, where):
    used = set(re.findall(r"\b(ex2d_[a-z_]+)\b", text))
    used = {u for u in used if not u.startswith("ex2d_jobs")}
    unknown = sorted(used - known)
    check(not unknown, f"{where}: metrics not exported by the services: {unknown}")
    return used


def normal(v):
    """A configuration value as the services print it: numbers as numbers, the rest as text."""
    if isinstance(v, bool):
        return str(v).lower()
    try:
        return float(v)
    except (TypeError, ValueError):
        return str(v)


def print_config_check(binary, cfg_text, case):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(cfg_text)
        path = f.name
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("EX2D_")}
        r = run([binary, "--config", path, "--print-config"], env=env, timeout=30)
        ok = check(r.returncode == 0, f"{case}: {os.path.basename(binary)} refuses the rendered configuration: "
                                      f"{(r.stdout + r.stderr).strip()[-400:]}")
        if ok:
            printed = flatten(yaml.safe_load(r.stdout))
            given = flatten(yaml.safe_load(cfg_text))
            differ = sorted(k for k, v in given.items() if normal(printed.get(k)) != normal(v))
            check(not differ, f"{case}: --print-config shows other values for {differ}")
        return r.returncode
    finally:
        os.unlink(path)


def free_port():
    return test_ports.unused_port()


def redis_cli(port, *args, user=None, password=None):
    cmd = ["redis-cli", "-p", str(port)]
    env = dict(os.environ)
    if user:
        cmd += ["--user", user, "--no-auth-warning"]
        env["REDISCLI_AUTH"] = password
    r = run(cmd + list(args), env=env, timeout=10)
    return (r.stdout + r.stderr).strip()  # redis-cli reports a failed AUTH on stderr


def pod_env(container, mounts, overrides, pod_name):
    """The environment a rendered container gets, on this machine: fieldRefs filled in, $(VAR)
    expanded, paths of mounted volumes mapped to local folders, then `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EX2D_")}
    fields = {"metadata.name": pod_name, "status.podIP": "127.0.0.1"}
    for e in container.get("env", []):
        if "valueFrom" in e:
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), ""), e["value"])
    for name, value in list(env.items()):
        if name.startswith("EX2D_"):
            for pod_path, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
                if value.startswith(pod_path):
                    env[name] = local + value[len(pod_path):]
                    break
    env.update(overrides)
    return env


def rendered_fleet_check(helm, chart, bins, work):
    """The chart's Redis (redis.conf, ACL users of tools/ex2d-redis-acl), ConfigMap, CURVE key
    mounts and the containers' environment as rendered, with the real services and the ctl
    Job's arguments, carry one simulated exposure end to end over CURVE."""
    ex2d = bins["ex2d"]
    expdir = f"{work}/preproc/20261122/00000007"
    os.makedirs(expdir)
    run([ex2d, "make-psf", "--camera", "r0", "-o", f"{work}/psf-full.fits"], check=True)
    run([ex2d, "make-psf", "--from", f"{work}/psf-full.fits", "--fibers", "25", "--wave-range", "6000,6100",
         "-o", f"{work}/psf.fits"], check=True)
    for i, cam in enumerate(("b3", "r3")):
        # the same PSF labelled with each camera: ex2d checks that image and PSF agree
        run([ex2d, "make-psf", "--from", f"{work}/psf.fits", "--camera", cam, "-o", f"{work}/psf-{cam}.fits"],
            check=True)
        run([ex2d, "simulate", "-p", f"{work}/psf-{cam}.fits", "-o", f"{expdir}/preproc-{cam}-00000007.fits",
             "--truth", f"{work}/truth-{cam}.fits", "--camera", cam, "--expid", "7", "--night", "20261122",
             "-n", "25", "-w", "6000,6100,0.8", "--seed", str(i + 1)], check=True)
    passwords = {r: f"pw-{r}-{os.getpid()}-0123456789" for r in ("reader", "worker", "writer", "ctl", "keda")}
    submit = ["submit", "--exposure-dir", expdir, "--psf", f"{work}/psf-{{camera}}.fits", "--output-root", f"{work}/out",
              "-w", "6000,6100,0.8", "-n", "25", "--compression", "none"]
    sets = ["worker.backend=cpu", "keda.enabled=true", "curve.enabled=true", "ctl.submit.enabled=true"]
    sets += [f"redis.auth.passwords.{r}={p}" for r, p in passwords.items()]
    sets += [f"curve.secrets.{r}=curve-{r}" for r in ROLES] + [f"curve.allowedKeys.{r}=curve-allowed-{r}" for r in ROLES]
    cmd = [helm, "template", RELEASE, chart, "--namespace", "ex2d-test"]
    for x in sets:
        cmd += ["--set", x]
    cmd += ["--set-json", "ctl.submit.args=" + json.dumps(submit),
            "--set-json", 'worker.extraEnv=[{"name":"EX2D_WORKER_THREADS","value":"1"}]']
    r = run(cmd)
    if not check(r.returncode == 0, f"fleet: helm template failed: {r.stderr[-400:]}"):
        return
    by = index([d for d in yaml.safe_load_all(r.stdout) if d])
    secret = by[("Secret", f"{FULLNAME}-redis-auth")]["data"]
    check({k: base64.b64decode(v).decode() for k, v in secret.items()} == passwords,
          "fleet: the auth Secret does not hold the given passwords")

    # Redis as the StatefulSet runs it: the init container's script, then redis.conf.
    rcm = by[("ConfigMap", f"{FULLNAME}-redis")]["data"]
    sts = by[("StatefulSet", f"{FULLNAME}-redis")]["spec"]["template"]["spec"]
    init = sts["initContainers"][0]
    os.makedirs(f"{work}/redis-conf")
    for name, text in rcm.items():
        with open(f"{work}/redis-conf/{name}", "w") as f:
            f.write(text)
    os.makedirs(f"{work}/auth-all")
    for role, pw in passwords.items():
        with open(f"{work}/auth-all/{role}", "w") as f:
            f.write(pw + "\n")
        os.chmod(f"{work}/auth-all/{role}", 0o400)
    env = dict(os.environ)
    env.update({e["name"]: e["value"] for e in init["env"]})
    env.update({"AUTH_DIR": f"{work}/auth-all", "ACL_FILE": f"{work}/users.acl"})
    r = run([init["command"][0], init["command"][1].replace("/etc/redis", f"{work}/redis-conf")], env=env)
    if not check(r.returncode == 0, f"fleet: the Redis init container's script failed: {r.stdout}{r.stderr}"):
        return
    acl = open(f"{work}/users.acl").read()
    check(all(pw not in acl for pw in passwords.values()), "fleet: clear-text password in the ACL file")
    users = sorted(re.findall(r"^user (\S+)", acl, re.M))
    check(users == ["default", "ex2d-ctl", "ex2d-keda", "ex2d-reader", "ex2d-worker", "ex2d-writer"],
          f"fleet: ACL users {users}")
    port = free_port()
    os.makedirs(f"{work}/data")
    conf = re.sub(r"^dir .*$", f"dir {work}/data", rcm["redis.conf"], flags=re.M)  # the pod's /data
    with open(f"{work}/redis.conf", "w") as f:
        f.write(conf)
    r = run(["redis-server", f"{work}/redis.conf", "--port", str(port), "--bind", "127.0.0.1",
             "--aclfile", f"{work}/users.acl", "--daemonize", "yes",
             "--pidfile", f"{work}/redis.pid", "--logfile", f"{work}/redis.log"])
    if not check(r.returncode == 0, f"fleet: redis-server refused the rendered redis.conf: {r.stdout}{r.stderr}"):
        return
    procs = []
    try:
        for _ in range(50):
            if redis_cli(port, "ping", user="ex2d-ctl", password=passwords["ctl"]) == "PONG":
                break
            time.sleep(0.1)
        check("NOAUTH" in redis_cli(port, "ping"), "fleet: Redis answers without authentication")
        check("NOPERM" in redis_cli(port, "flushall", user="ex2d-ctl", password=passwords["ctl"]),
              "fleet: the ctl user may FLUSHALL")
        check("WRONGPASS" in redis_cli(port, "ping", user="ex2d-worker", password=passwords["reader"]),
              "fleet: ex2d-worker accepts the reader's password")
        keda = dict(user="ex2d-keda", password=passwords["keda"])
        check("redis_version:" in redis_cli(port, "info", "server", **keda), "fleet: ex2d-keda cannot run INFO (lag mode)")
        check("NOPERM" in redis_cli(port, "xadd", "ex2d:jobs:nightly", "*", "a", "b", **keda), "fleet: ex2d-keda may write")

        # CURVE key pairs; each role gets its secret key and the public keys it accepts.
        mounts, keys = {}, {}
        for role in ROLES:
            os.makedirs(f"{work}/curve/{role}/own")
            os.makedirs(f"{work}/curve/{role}/allowed")
            r = run([bins["ctl"], "keygen", "--secret-file", f"{work}/curve/{role}/own/secret.key",
                     "--public-file", f"{work}/curve/{role}/public.key"])
            if not check(r.returncode == 0, f"fleet: ex2dctl keygen: {r.stderr}"):
                return
            keys[role] = r.stdout.strip()
        for role, accepted in (("reader", ["worker"]), ("writer", ["worker"]), ("worker", ["reader", "writer"])):
            for other in accepted:
                with open(f"{work}/curve/{role}/allowed/{other}.key", "w") as f:
                    f.write(f"{keys[other]} {other}\n")
        cfg_path = f"{work}/ex2d.yaml"
        with open(cfg_path, "w") as f:
            f.write(by[("ConfigMap", f"{FULLNAME}-config")]["data"]["ex2d.yaml"])
        common = {"EX2D_CONFIG": cfg_path, "EX2D_REDIS_HOST": "127.0.0.1", "EX2D_REDIS_PORT": str(port),
                  "EX2D_SERVICE_HTTP_HOST": "127.0.0.1"}
        http = {}
        for role in ROLES:
            pod = by[("Deployment", f"{FULLNAME}-{role}")]["spec"]["template"]["spec"]
            c = pod["containers"][0]
            os.makedirs(f"{work}/auth-{role}")
            shutil.copy(f"{work}/auth-all/{role}", f"{work}/auth-{role}/password")
            mounts = {"/etc/ex2d/redis": f"{work}/auth-{role}", "/etc/ex2d/curve/own": f"{work}/curve/{role}/own",
                      "/etc/ex2d/curve/allowed": f"{work}/curve/{role}/allowed"}
            http[role] = free_port()
            over = dict(common, EX2D_SERVICE_HTTP_PORT=str(http[role]))
            env = pod_env(c, mounts, over, f"{role}-1")
            if "EX2D_ZMQ_BIND" in env:  # the pod's IP and fixed port; one host here, so a free port
                env["EX2D_ZMQ_BIND"] = re.sub(r":\d+$", f":{free_port()}", env["EX2D_ZMQ_BIND"])
                check(env["EX2D_ZMQ_BIND"].startswith("tcp://127.0.0.1:"), f"fleet: {role} binds {env['EX2D_ZMQ_BIND']}")
            check(os.path.isfile(env.get("EX2D_ZMQ_CURVE_SECRET_KEY_FILE", "")), f"fleet: {role} has no CURVE key file")
            log = open(f"{work}/{role}.log", "w")
            procs.append((role, subprocess.Popen([bins[role]] + c.get("args", []), env=env, stdout=log,
                                                 stderr=subprocess.STDOUT)))
        job = [d for d in by.values() if d["kind"] == "Job"][0]["spec"]["template"]["spec"]["containers"][0]
        os.makedirs(f"{work}/auth-ctl")
        shutil.copy(f"{work}/auth-all/ctl", f"{work}/auth-ctl/password")
        ctl_env = pod_env(job, {"/etc/ex2d/redis": f"{work}/auth-ctl"}, common, "ctl-1")
        r = run([bins["ctl"]] + job["args"], env=ctl_env, timeout=60)
        if check(r.returncode == 0, f"fleet: the ctl Job's ex2dctl {job['args'][0]} failed: {r.stdout}{r.stderr}"):
            r = run([bins["ctl"], "wait", "--exposure", "7", "--timeout", "90"], env=ctl_env, timeout=120)
            check(r.returncode == 0, f"fleet: exposure not done through the chart's Redis, users and CURVE keys: "
                                     f"{r.stdout}{r.stderr}")
            for cam in ("b3", "r3"):
                path = f"{work}/out/exposures/20261122/00000007/frame-{cam}-00000007.fits"
                check(os.path.exists(path) and os.path.getsize(path) > 0, f"fleet: frame {cam} not written")
            for role in ("reader", "writer"):
                metrics = run(["curl", "-s", f"http://127.0.0.1:{http[role]}/metrics"]).stdout
                m = re.search(r'ex2d_zap_requests_total\{[^}]*result="accepted"[^}]*\} (\d+)', metrics)
                check(m is not None and int(m.group(1)) >= 1, f"fleet: {role} accepted no CURVE handshake")
        for role, p in procs:
            p.send_signal(signal.SIGTERM)
        for role, p in procs:
            try:
                rc = p.wait(timeout=40)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
            check(rc == 0, f"fleet: {role} exited {rc} after SIGTERM (log {work}/{role}.log)")
        procs = []
    finally:
        for _, p in procs:
            p.kill()
        try:
            os.kill(int(open(f"{work}/redis.pid").read()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source-dir", required=True, help="the repository root")
    for b in ("reader", "worker", "writer", "ctl", "ex2d"):
        ap.add_argument("--" + b, default="", help=f"the {b} binary (optional)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args()
    src = os.path.abspath(args.source_dir)
    chart = os.path.join(src, "charts/ex2d")
    helm = find_helm()
    if not helm:
        print("SKIP: helm not found ($EX2D_HELM, PATH, /opt/ex2d-tools/bin, ~/.cache/ex2d/bin); "
              "tools/fetch-helm installs it")
        return 77
    t0 = time.time()
    print("helm:", run([helm, "version", "--short"]).stdout.strip())
    defaults = yaml.safe_load(open(os.path.join(chart, "values.yaml")))
    alerts = yaml.safe_load(open(os.path.join(chart, "files/ex2d-alerts.yaml")))
    dashboard = json.load(open(os.path.join(chart, "dashboards/ex2d.json")))

    # Metrics named in the rules and the dashboard exist; every alert has a runbook section.
    known = exported_metrics(os.path.join(src, "services/common/src/metrics.cpp"))
    check(len(known) >= 10, f"metrics.cpp: only {sorted(known)} found")
    check_metric_names(open(os.path.join(chart, "files/ex2d-alerts.yaml")).read(), known, "alerts")
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    check(len(exprs) >= 15, f"dashboard: only {len(exprs)} queries")
    check_metric_names("\n".join(exprs), known, "dashboard")
    ops_path = os.path.join(src, "docs/operations.md")
    ops = open(ops_path).read().lower() if os.path.exists(ops_path) else ""
    names = [r["alert"] for g in alerts["groups"] for r in g["rules"] if "alert" in r]
    for rule in (r for g in alerts["groups"] for r in g["rules"]):
        check(rule.get("labels", {}).get("severity") in ("warning", "critical"), f"alert {rule.get('alert')}: severity")
        anchor = rule.get("annotations", {}).get("runbook", "").split("#")[-1]
        check(anchor == rule["alert"].lower() and re.search(r"^#+ .*\b" + anchor + r"\b", ops, re.M) is not None,
              f"alert {rule['alert']}: no section {anchor} in docs/operations.md")
    if shutil.which("promtool"):
        r = run(["promtool", "check", "rules", os.path.join(chart, "files/ex2d-alerts.yaml")])
        check(r.returncode == 0, f"promtool check rules: {r.stdout}{r.stderr}")
    print(f"static checks: {len(names)} alerts, {len(exprs)} dashboard queries, {len(known)} exported metric names")

    # Lint and render every values file.
    cases = [("default", None)] + [(f, os.path.join(chart, "ci", f)) for f in sorted(os.listdir(os.path.join(chart, "ci")))
                                   if f.endswith(".yaml")]
    check(len(cases) >= 5, f"only {len(cases) - 1} values files in charts/ex2d/ci")
    seen_backends, seen_keda, seen_external = set(), set(), set()
    for case, path in cases:
        files = [path] if path else []
        r = run([helm, "lint", "--strict", chart, "--namespace", "ex2d-test"] + sum((["-f", f] for f in files), []))
        check(r.returncode == 0, f"{case}: helm lint failed:\n{r.stdout}{r.stderr}")
        r = render(helm, chart, files)
        if not check(r.returncode == 0, f"{case}: helm template failed: {r.stderr}"):
            continue
        docs = list(yaml.safe_load_all(r.stdout))
        values = deep_merge(defaults, yaml.safe_load(open(path)) if path else {})
        cfg = check_render(case, docs, values, chart, src, alerts, dashboard)
        seen_backends.add(values["worker"]["backend"])
        seen_keda.add(values["keda"]["enabled"])
        seen_external.add(not values["redis"]["enabled"])
        if cfg is not None:
            for role in ROLES:
                if getattr(args, role):
                    print_config_check(getattr(args, role), yaml.safe_dump(cfg), f"{case}/{role}")
        print(f"{case}: {len([d for d in docs if d])} objects checked")
    check(seen_backends >= {"cpu", "cuda"} and seen_keda == {True, False} and seen_external == {True, False},
          "the values files must cover cpu and cuda workers, KEDA on and off, in-chart and external Redis")

    # Renders that must be refused, with the reason named.
    refused = [
        (["terminationGracePeriodSeconds=20"], "must exceed config.service.drain_timeout_s"),
        (["config.service.drain_timeout_s=45"], "must exceed config.service.drain_timeout_s"),
        (["worker.backend=gpu"], "worker.backend must be cpu, cuda or auto"),
        (["config.redis.password=hunter2"], "config.redis.password must stay empty"),
        (["redis.enabled=false"], "redis.external.host is required"),
        (["keda.enabled=true", "keda.nightly=false"], "keda.enabled needs keda.nightly or at least one"),
        (["ctl.submit.enabled=true"], "ctl.submit.enabled needs ctl.submit.args"),
    ]
    for sets, message in refused:
        r = render(helm, chart, sets=sets)
        check(r.returncode != 0 and message in r.stderr, f"--set {' '.join(sets)}: not refused with '{message}': {r.stderr[-300:]}")
    # An unknown configuration key renders, but the services must refuse it (so the check above can fail).
    if args.worker:
        r = render(helm, chart, sets=["config.service.bogus_key=1"])
        cm = index([d for d in yaml.safe_load_all(r.stdout) if d])[("ConfigMap", f"{FULLNAME}-config")]
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(cm["data"]["ex2d.yaml"])
        rr = run([args.worker, "--config", f.name, "--print-config"])
        os.unlink(f.name)
        check(rr.returncode != 0 and "bogus_key" in rr.stdout + rr.stderr,
              "an unknown key in config is not refused by ex2d-worker --print-config")
    print(f"refused renders: {len(refused)} checked")

    # The chart's Redis and ACL users with the real services.
    bins = {b: getattr(args, b) for b in ("reader", "worker", "writer", "ctl", "ex2d")}
    if all(bins.values()) and shutil.which("redis-server") and shutil.which("redis-cli"):
        work = tempfile.mkdtemp(prefix="ex2d-chart-fleet-")
        t1 = time.time()
        rendered_fleet_check(helm, chart, bins, work)
        print(f"fleet through the chart's Redis, ACL users and ConfigMap: {time.time() - t1:.1f} s")
        if not args.keep and not failures:
            shutil.rmtree(work, ignore_errors=True)
        elif failures:
            print("work folder kept:", work)
    else:
        print("note: binaries or redis-server not given; the rendered fleet run is left out")

    print(f"chart checks: {time.time() - t0:.1f} s")
    if failures:
        print(f"{len(failures)} check(s) failed:")
        for f in failures:
            print("  -", f)
        return 1
    print("all chart checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
