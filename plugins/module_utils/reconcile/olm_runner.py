# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The OLM install run (module gpuaas.platform.olm_operator): namespace, OperatorGroup (create or reuse), Subscription,
InstallPlan approval, the CSV's phase, ResolutionFailed within its grace, and the operator's custom resource (operand)
created, owned, adopted or merged (manifests/olm.py decides; this runner reads, waits and writes). The module file keeps
the documentation and the argument spec (OLM_OPERATOR_ARGUMENT_SPEC) entry point only, as the tenants module does."""

from __future__ import annotations

import time
import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import (
    ApiException,
    get_client,
    translate_api_exception,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.errors import GpuaasError, ValidationError
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.engine import ApplyEngine
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import (
    FIELD_MANAGER,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    is_owned,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.results import ReconcileResult
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests.olm import (
    CATALOG_SOURCES_UNHEALTHY,
    OLM_V1,
    OLM_V1ALPHA1,
    RESOLUTION_FAILED,
    alm_examples,
    csv_failure,
    csv_phase,
    expected_csv,
    namespace_object,
    operand_conflict_error,
    operand_example,
    operand_mode,
    operand_object,
    operator_group_mode,
    operator_group_object,
    operator_group_plan,
    plan_decision,
    resolution_error,
    subscription_condition,
    subscription_config_problems,
    subscription_object,
)
from ansible_collections.gpuaas.platform.plugins.module_utils.module_base import GpuaasModule

POLL = 2.0
PACKAGE_MANIFEST = ("packages.operators.coreos.com/v1", "PackageManifest")


class OlmOperator:
    def __init__(self, module: GpuaasModule, client: t.Any) -> None:
        self.module = module
        self.client = client
        self.p = module.params
        self.check = module.check_mode
        self.changed = False
        self.actions: t.List[str] = []
        self.warnings: t.List[str] = []
        self.diff: t.Dict[str, t.List[str]] = {"before": [], "after": []}
        self.sub_name = self.p["name"] or self.p["package"]
        self.og_name = self.p["operator_group_name"] or self.p["namespace"]
        self.missing_namespaces: t.Set[str] = set()
        self.engine = ApplyEngine(client, check_mode=self.check)
        # When a ResolutionFailed=True condition was first seen on the Subscription in this run (monotonic clock).
        self.resolution_failed_since: t.Optional[float] = None

    def res(self, api_version: str, kind: str) -> t.Any:
        return self.client.resource(api_version, kind)

    def record(self, action: str, ref: str, before: t.Any, after: t.Any) -> None:
        self.changed = True
        self.actions.append("%s %s" % (action, ref))
        self.diff["before"].append("%s: %s" % (ref, _short(before)))
        self.diff["after"].append("%s: %s" % (ref, _short(after)))

    def apply(self, desired: t.List[t.Dict[str, t.Any]]) -> ReconcileResult:
        """Reconcile ``desired`` through the apply engine (one field manager, owned-field compare, dry run in
        check mode, a namespace being created first), recording actions and diffs."""
        result = self.engine.reconcile(desired)
        for r in result.results:
            if r.changed:
                ref = "%s %s%s" % (r.ref.kind, r.ref.namespace + "/" if r.ref.namespace else "", r.ref.name)
                self.record(r.action, ref, r.before if r.action != "created" else None, r.after)
        return result

    # ---- present ------------------------------------------------------------------------------------
    def validate(self, live_ns: t.Optional[t.Dict[str, t.Any]]) -> t.Dict[str, t.Any]:
        """Every problem of the options and of the namespace's OLM objects, at once, before the first write;
        returns the OperatorGroup plan."""
        p = self.p
        ns = p["namespace"]
        problems: t.List[str] = []
        plan: t.Dict[str, t.Any] = {"action": "skip", "name": None, "warnings": []}
        try:
            mode = operator_group_mode(p["operator_group"])
        except GpuaasError as err:
            problems.append(err.message)
            mode = "none"
        problems.extend(subscription_config_problems(p["subscription_config"]))
        if live_ns is None and not p["create_namespace"]:
            problems.append("namespace %s does not exist (create it or set create_namespace: true)" % ns)
        existing = self.res(OLM_V1, "OperatorGroup").list(namespace=ns) if live_ns is not None and mode != "none" else []
        try:
            plan = operator_group_plan(mode, self.og_name, ns, p["target_namespaces"], existing)
        except GpuaasError as err:
            problems.append("%s (%s)" % (err.message, err.hint))
        if live_ns is not None:
            for sub in self.res(OLM_V1ALPHA1, "Subscription").list(namespace=ns):
                if (sub.get("spec") or {}).get("name") == p["package"] and sub["metadata"]["name"] != self.sub_name:
                    problems.append(
                        "namespace %s already has Subscription %s for package %s (an OperatorHub install?); a second "
                        "Subscription %s for the same package would make OLM's resolution fail (set name: %s, role "
                        "variable gpuaas_*_olm_subscription_name)"
                        % (ns, sub["metadata"]["name"], p["package"], self.sub_name, sub["metadata"]["name"]))
        if problems:
            raise ValidationError("olm_operator cannot install %s in %s; nothing was written" % (p["package"], ns),
                                  hint="fix each problem listed, then re-run", problems=problems)
        self.warnings.extend(plan["warnings"])
        return plan

    def present(self) -> t.Dict[str, t.Any]:
        p = self.p
        ns = p["namespace"]
        desired: t.List[t.Dict[str, t.Any]] = []
        live_ns = self.res("v1", "Namespace").get(ns)
        plan = self.validate(live_ns)
        if live_ns is None:
            desired.append(namespace_object(ns, p["namespace_labels"]))
            if self.check:
                self.missing_namespaces.add(ns)
        elif is_owned(live_ns):
            if p["namespace_labels"]:
                desired.append(namespace_object(ns, p["namespace_labels"]))
        elif p["namespace_labels"]:
            self.label_foreign_namespace(live_ns, p["namespace_labels"])
        if plan["action"] == "apply":
            desired.append(operator_group_object(plan["name"], ns, p["target_namespaces"]))
        desired.append(subscription_object(
            self.sub_name, ns, p["package"], p["channel"], p["source"], p["source_namespace"],
            p["starting_csv"], p["install_plan_approval"], p["subscription_config"]))
        applied = self.apply(desired).find("Subscription", self.sub_name, ns)
        sub = applied.object if applied is not None else None
        result: t.Dict[str, t.Any] = {"operator_group": {"name": plan["name"], "action": plan["action"]}}
        if self.check:
            result["subscription"] = sub
            live_sub = None if ns in self.missing_namespaces else self.res(OLM_V1ALPHA1, "Subscription").get(self.sub_name, ns)
            name = expected_csv(p["starting_csv"], live_sub)
            csv = self.res(OLM_V1ALPHA1, "ClusterServiceVersion").get(name, ns) if name and live_sub else None
            result["csv"] = {"name": name, "phase": csv_phase(csv)}
            result["alm_examples"] = alm_examples(csv)
            if p["operand"]:
                result["operand"] = self.operand(result["alm_examples"], csv_phase(csv) == "Succeeded", None)
            return result
        deadline = time.time() + p["wait_timeout"]
        csv = self.drive_install(deadline, result)
        result["subscription"] = self.res(OLM_V1ALPHA1, "Subscription").get(self.sub_name, ns)
        failed = subscription_condition(result["subscription"], RESOLUTION_FAILED)
        if failed:
            self.warnings.append("the operator is installed, but OLM reports %s on Subscription %s/%s: %s"
                                 % (RESOLUTION_FAILED, ns, self.sub_name, failed.get("message")))
        if csv is not None:
            spec_version = (csv.get("spec") or {}).get("version")
            result["csv"] = {"name": csv["metadata"]["name"], "phase": csv_phase(csv), "version": spec_version}
            result["alm_examples"] = alm_examples(csv)
        if p["operand"]:
            result["operand"] = self.operand(result.get("alm_examples") or [], csv_phase(csv) == "Succeeded", deadline)
        return result

    def label_foreign_namespace(self, live: t.Dict[str, t.Any], labels: t.Mapping[str, str]) -> None:
        """Put ``labels`` on a namespace the collection did not create: only those labels, no ownership label (the
        engine labels what it applies as the collection's, and this namespace is not), no forced conflicts."""
        ns = live["metadata"]["name"]
        have = (live.get("metadata") or {}).get("labels") or {}
        if all(have.get(k) == v for k, v in labels.items()):
            return
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": dict(labels)}}
        try:
            self.res("v1", "Namespace").apply(body, FIELD_MANAGER, force=False, dry_run=self.check)
        except ApiException as exc:
            err = translate_api_exception(exc, "label", "Namespace %s" % ns)
            raise GpuaasError("cannot label namespace %s (not managed by gpuaas.platform) with %s: %s"
                              % (ns, labels, err.message),
                              hint="a label of that name is set to another value by someone else; set namespace_labels "
                                   "to the value the namespace has, or change it there first",
                              problems=err.problems, details=err.details)
        self.record("labelled", "Namespace %s" % ns, {"metadata.labels": {k: have.get(k) for k in labels}},
                    {"metadata.labels": dict(labels)})

    def drive_install(self, deadline: float, result: t.Dict[str, t.Any]) -> t.Optional[t.Dict[str, t.Any]]:
        """Approve the expected InstallPlan (Manual) and wait for the CSV; returns the CSV.

        Stops early when OLM cannot resolve the Subscription (see ``check_resolution``)."""
        p = self.p
        ns = p["namespace"]
        subs = self.res(OLM_V1ALPHA1, "Subscription")
        plans = self.res(OLM_V1ALPHA1, "InstallPlan")
        csvs = self.res(OLM_V1ALPHA1, "ClusterServiceVersion")
        while True:
            sub = subs.get(self.sub_name, ns) or {}
            status = sub.get("status") or {}
            name = expected_csv(p["starting_csv"], sub)
            csv = csvs.get(name, ns) if name else None
            if csv is not None:
                failure = csv_failure(csv)
                if failure:
                    raise GpuaasError(failure, hint="kubectl -n %s describe csv %s; fix the cause and re-run" % (ns, name))
                if csv_phase(csv) == "Succeeded" and status.get("installedCSV") in (None, name):
                    return csv
            else:
                self.check_resolution(sub)
            ref = status.get("installPlanRef") or {}
            if ref.get("name") and p["install_plan_approval"] == "Manual":
                plan = plans.get(ref["name"], ns)
                if plan is not None:
                    action, reason = plan_decision(plan, sub, p["starting_csv"])
                    result["install_plan"] = {"name": ref["name"], "approved": bool(plan["spec"].get("approved")),
                                              "action": action, "reason": reason}
                    if action == "approve":
                        self.approve(plan)
                        result["install_plan"]["approved"] = True
                    elif action == "hold":
                        result["pending_install_plan"] = {"name": ref["name"], "reason": reason}
                        installed = status.get("installedCSV")
                        if installed:
                            return csvs.get(installed, ns)
                        raise GpuaasError(reason, hint="pin starting_csv to the CSV this InstallPlan installs, or "
                                                       "approve it yourself after review")
            if not p["wait"]:
                return csv
            if time.time() > deadline:
                failed = subscription_condition(sub, RESOLUTION_FAILED)
                raise GpuaasError(
                    "timed out after %ss waiting for the operator %s in %s: Subscription state %r, CSV %s phase %r%s"
                    % (p["wait_timeout"], p["package"], ns, status.get("state"), name, csv_phase(csv),
                       "; OLM: %s" % failed.get("message") if failed else ""),
                    hint="check the catalog source %s/%s is healthy and serves package %s in channel %s "
                         "(kubectl -n %s get subscription,installplan,csv)"
                         % (p["source_namespace"], p["source"], p["package"], p["channel"], ns))
            time.sleep(POLL)

    def check_resolution(self, sub: t.Mapping[str, t.Any]) -> None:
        """Raise once a ResolutionFailed=True condition has held for ``resolution_grace`` seconds.

        OLM sets it within seconds of a Subscription naming a package or channel its catalog lacks, and clears it
        as soon as a resolution succeeds: a condition left from before this run's change disappears well within
        the grace, a real one stays."""
        failed = subscription_condition(sub, RESOLUTION_FAILED)
        if failed is None:
            self.resolution_failed_since = None
            return
        now = time.monotonic()
        if self.resolution_failed_since is None:
            self.resolution_failed_since = now
        held = now - self.resolution_failed_since
        if held < self.p["resolution_grace"]:
            return
        p = self.p
        channels, default = self.catalog_channels()
        raise resolution_error(p["package"], p["channel"], p["source"], p["source_namespace"], p["namespace"],
                               self.sub_name, failed, held, channels, default,
                               subscription_condition(sub, CATALOG_SOURCES_UNHEALTHY))

    def catalog_channels(self) -> t.Tuple[t.List[str], t.Optional[str]]:
        """The package's channels and default channel from its PackageManifest, when the cluster serves that API
        (OpenShift's package server); ([], None) otherwise."""
        try:
            manifest = self.res(*PACKAGE_MANIFEST).get(self.p["package"], self.p["source_namespace"])
        except (GpuaasError, ApiException):
            return [], None
        status = (manifest or {}).get("status") or {}
        return [c.get("name") for c in status.get("channels") or [] if c.get("name")], status.get("defaultChannel")

    def approve(self, plan: t.Dict[str, t.Any]) -> None:
        meta = plan["metadata"]
        plans = self.res(OLM_V1ALPHA1, "InstallPlan")
        try:
            self.client.request("PATCH", plans.path(meta["name"], meta["namespace"]),
                                body={"spec": {"approved": True}}, content_type="application/merge-patch+json")
        except ApiException as exc:
            raise translate_api_exception(exc, "approve", "InstallPlan %s/%s" % (meta["namespace"], meta["name"]))
        self.changed = True
        self.actions.append("approved InstallPlan %s/%s (%s)" % (
            meta["namespace"], meta["name"], ", ".join(plan["spec"].get("clusterServiceVersionNames") or [])))

    # ---- operand ------------------------------------------------------------------------------------
    def operand_resource(self, api_version: str, kind: str, deadline: t.Optional[float]) -> t.Any:
        """The operand's API; after a fresh install its CRD can take a moment to be served (discovery is re-read
        until ``deadline``; None = one look, check mode)."""
        while True:
            if hasattr(self.client, "invalidate"):
                self.client.invalidate(api_version)
            try:
                return self.res(api_version, kind)
            except GpuaasError:
                if deadline is None or time.time() > deadline:
                    raise
            time.sleep(POLL)

    def operand(self, examples: t.List[t.Dict[str, t.Any]], installed: bool,
                deadline: t.Optional[float]) -> t.Dict[str, t.Any]:
        """Apply the operator's custom resource (see the ``operand`` option and manifests/olm.operand_mode)."""
        o = self.p["operand"]
        out: t.Dict[str, t.Any] = {"kind": o["kind"], "name": o["name"], "namespace": o.get("namespace")}
        if not installed:
            if self.check:
                return dict(out, mode=None, action="skipped", reason="the operator is not installed yet (check mode)")
            return dict(out, mode=None, action="skipped", reason="the operator's CSV has not succeeded (wait: false)")
        try:
            res = self.operand_resource(o["api_version"], o["kind"], None if self.check else deadline)
        except GpuaasError:
            if self.check:
                return dict(out, mode=None, action="skipped", reason="%s is not served yet" % o["api_version"])
            raise
        ns = o.get("namespace") if res.namespaced else None
        ref = "%s %s%s" % (o["kind"], ns + "/" if ns else "", o["name"])
        try:
            live = res.get(o["name"], ns)
        except ApiException as exc:
            raise translate_api_exception(exc, "read", ref)
        mode = operand_mode(live, o["adopt"])
        example = operand_example(examples, o["kind"], omit=o.get("example_omit") or ()) if o["from_example"] else {}
        desired = operand_object(o["api_version"], o["kind"], o["name"], ns, o["spec"] or {}, example, mode)
        out["mode"] = mode
        if mode != "merge":
            applied = self.apply([desired]).find(o["kind"], o["name"], ns)
            out["action"] = applied.action if applied is not None else "unchanged"
            if mode == "adopt" and out["action"] != "unchanged":
                self.actions.append("adopted %s (labelled %s=%s)" % (ref, MANAGED_BY_LABEL, MANAGED_BY_VALUE))
            return out
        if not desired["spec"] or self.engine.compare(desired, live) == "unchanged":
            out["action"] = "unchanged"
            return out
        try:
            after = res.apply(desired, FIELD_MANAGER, force=False, dry_run=self.check)
        except ApiException as exc:
            err = translate_api_exception(exc, "dry-run apply" if self.check else "apply", ref)
            if err.details.get("status") == 409:
                raise operand_conflict_error(ref, o.get("adopt_variable"), err.problems, err.message)
            raise err
        out["action"] = "updated"
        self.record("merged", ref, self.engine.before_view(live), self.engine.after_view(after, desired))
        return out

    # ---- absent -------------------------------------------------------------------------------------
    def absent(self) -> t.Dict[str, t.Any]:
        p = self.p
        ns = p["namespace"]
        subs = self.res(OLM_V1ALPHA1, "Subscription")
        csvs = self.res(OLM_V1ALPHA1, "ClusterServiceVersion")
        sub = subs.get(self.sub_name, ns)
        csv_names = set()
        if sub is not None:
            status = sub.get("status") or {}
            for key in ("installedCSV", "currentCSV"):
                if status.get(key):
                    csv_names.add(status[key])
            self.delete(subs, self.sub_name, ns, "Subscription")
        if p["starting_csv"]:
            csv_names.add(p["starting_csv"])
        label = "%s.%s" % (p["package"], ns)
        if len(label) <= 63:  # OLM's operator label; longer names are not valid label keys
            for csv in csvs.list(namespace=ns, label_selector="operators.coreos.com/" + label):
                csv_names.add(csv["metadata"]["name"])
        for name in sorted(csv_names):
            self.delete(csvs, name, ns, "ClusterServiceVersion")
        if operator_group_mode(p["operator_group"]) != "none":
            groups = self.res(OLM_V1, "OperatorGroup")
            og = groups.get(self.og_name, ns)
            if og is not None and is_owned(og):
                self.delete(groups, self.og_name, ns, "OperatorGroup")
        if p["delete_namespace"]:
            nss = self.res("v1", "Namespace")
            live = nss.get(ns)
            if live is not None and is_owned(live):
                self.delete(nss, ns, None, "Namespace")
        if p["wait"] and not self.check:
            deadline = time.time() + p["wait_timeout"]
            while any(csvs.get(n, ns) is not None for n in csv_names) and time.time() < deadline:
                time.sleep(POLL)
        return {}

    def delete(self, res: t.Any, name: str, ns: t.Optional[str], kind: str) -> None:
        ref = "%s %s%s" % (kind, ns + "/" if ns else "", name)
        try:
            if res.get(name, ns) is None:
                return
            res.delete(name, ns, dry_run=self.check)
        except ApiException as exc:
            raise translate_api_exception(exc, "delete", ref)
        self.changed = True
        self.actions.append("deleted %s" % ref)
        self.diff["before"].append("%s: present" % ref)
        self.diff["after"].append("%s: absent" % ref)


def _short(obj: t.Optional[t.Dict[str, t.Any]]) -> str:
    if obj is None:
        return "absent"
    return repr({k: obj.get(k) for k in ("spec",) if k in obj}
                or {"metadata.labels": obj.get("metadata.labels", (obj.get("metadata") or {}).get("labels"))})


def run(module: GpuaasModule) -> t.Dict[str, t.Any]:
    op = OlmOperator(module, get_client(module))
    result = op.present() if module.params["state"] == "present" else op.absent()
    result.update(changed=op.changed, actions=op.actions)
    if op.warnings:
        result["warnings"] = op.warnings
    if module._diff:
        result["diff"] = {"before": "\n".join(op.diff["before"]) + "\n", "after": "\n".join(op.diff["after"]) + "\n"}
    return result


# The module's options; documented in plugins/modules/olm_operator.py.
OLM_OPERATOR_ARGUMENT_SPEC: t.Dict[str, t.Any] = dict(
    state=dict(type="str", choices=["present", "absent"], default="present"),
    package=dict(type="str", required=True),
    name=dict(type="str"),
    namespace=dict(type="str", required=True),
    create_namespace=dict(type="bool", default=True),
    namespace_labels=dict(type="dict", default={}),
    channel=dict(type="str"),
    source=dict(type="str", default="redhat-operators"),
    source_namespace=dict(type="str", default="openshift-marketplace"),
    starting_csv=dict(type="str"),
    install_plan_approval=dict(type="str", choices=["Automatic", "Manual"], default="Automatic"),
    subscription_config=dict(type="dict"),
    operator_group=dict(type="raw", default="auto"),
    operator_group_name=dict(type="str"),
    target_namespaces=dict(type="list", elements="str", default=[]),
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=600),
    resolution_grace=dict(type="int", default=30),
    operand=dict(type="dict", options=dict(
        api_version=dict(type="str", required=True),
        kind=dict(type="str", required=True),
        name=dict(type="str", required=True),
        namespace=dict(type="str"),
        spec=dict(type="dict", default={}),
        from_example=dict(type="bool", default=True),
        example_omit=dict(type="list", elements="str", default=[]),
        adopt=dict(type="bool", default=False),
        adopt_variable=dict(type="str"),
    )),
    delete_namespace=dict(type="bool", default=False),
)
