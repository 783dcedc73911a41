# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuaas.platform contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

"""Values the Kueue API accepts (v1beta2 words), defined once for the inventory model and the builders."""

from __future__ import annotations

QUEUEING_STRATEGIES = ("BestEffortFIFO", "StrictFIFO")
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")
RECLAIM_POLICIES = ("Never", "LowerPriority", "Any")
WITHIN_CQ_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority")
BORROW_POLICIES = ("Never", "LowerPriority")
FUNGIBILITY_POLICIES = ("MayStopSearch", "TryNextFlavor")
# v1beta1 words still accepted in options, mapped to their v1beta2 meaning.
FUNGIBILITY_OLD = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}
FUNGIBILITY_PREFERENCES = ("BorrowingOverPreemption", "PreemptionOverBorrowing")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
# What Kueue's defaulting webhook sets on a ClusterQueue that leaves a field out (v1beta2): the import leaves these
# values out of the inventory, as the builders never set them.
CLUSTER_QUEUE_DEFAULTS = {
    "queueingStrategy": "BestEffortFIFO",
    "stopPolicy": "None",
    "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
    "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never", "borrowWithinCohort": {"policy": "Never"}},
}
# The same for a LocalQueue.
LOCAL_QUEUE_DEFAULTS = {"stopPolicy": "None"}
