# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""The adoption report of a tenancy run (mixed into TenancyRunner): the objects the ownership guard let the run take
over, warned about, and the GPU workloads of adopted namespaces that the admission policy would refuse."""

from __future__ import annotations

import typing as t

from ansible_collections.gpuaas.platform.plugins.module_utils.kube.client import ApiException, translate_api_exception
from ansible_collections.gpuaas.platform.plugins.module_utils.kube.ownership import adoption_name
from ansible_collections.gpuaas.platform.plugins.module_utils.manifests import tenancy as builders


class AdoptionReport:
    """``report_adoption`` of a run with a client, its mode and its warnings (``InventoryRun``)."""

    client: t.Any
    check_mode: bool
    warnings: t.List[str]

    def report_adoption(self, adopted: t.Sequence[t.Mapping[str, t.Any]]) -> t.List[t.Dict[str, t.Any]]:
        """Warn about adopted objects; return the GPU workloads of adopted namespaces the policy would refuse."""
        if not adopted:
            return []
        verb = "would adopt" if self.check_mode else "adopted"
        self.warnings.append("%s %d object%s that gpuaas.platform did not manage (labelled, then managed and pruned "
                             "like its own): %s" % (verb, len(adopted), "" if len(adopted) == 1 else "s", ", ".join(
                                 "%s (%s; managers: %s)" % (adoption_name(a["kind"], a["name"], a.get("namespace")),
                                                            a.get("reason"), ", ".join(a.get("managers") or []) or "none")
                                 for a in adopted)))
        namespaces = sorted(a["name"] for a in adopted if a["kind"] == "Namespace")
        objects: t.List[t.Dict[str, t.Any]] = []
        unreadable: t.List[str] = []
        for api_version, kind in builders.ADOPTION_WORKLOAD_KINDS:
            for ns in namespaces:
                try:
                    items = self.client.resource(api_version, kind).list(namespace=ns)
                except ApiException as exc:
                    err = translate_api_exception(exc, "list", "%s in namespace %s" % (kind, ns))
                    if err.details.get("status") != 403:
                        raise err
                    unreadable.append("%s in %s" % (kind, ns))  # a least-privilege account: say so, do not fail
                    continue
                for item in items:
                    item.setdefault("kind", kind)
                    objects.append(item)
        if unreadable:
            self.warnings.append("cannot list %s (forbidden): the GPU workloads of the adopted namespaces that the "
                                 "admission policy would refuse were not checked there; grant list on them or check "
                                 "by hand" % ", ".join(unreadable))
        refused = builders.workloads_refused_on_update(objects)
        if refused:
            self.warnings.append(
                "%d existing GPU workload%s in adopted namespaces carr%s no label %s: the admission policy %s refuses "
                "%s next update (add the label, pointing at a LocalQueue of the tenant, to submit %s through Kueue): %s"
                % (len(refused), "" if len(refused) == 1 else "s", "ies" if len(refused) == 1 else "y",
                   builders.QUEUE_LABEL, builders.POLICY_NAME, "its" if len(refused) == 1 else "their",
                   "it" if len(refused) == 1 else "them",
                   ", ".join("%s %s/%s (%s)" % (w["kind"], w["namespace"], w["name"], ", ".join(w["resources"]))
                             for w in refused)))
        return refused
