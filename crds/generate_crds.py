#!/usr/bin/env python3
"""Writes the allocguard.io CRDs (allocatorpolicies, replaycanaries) into crds/.

The two CRDs share the allocator, canary and limits schemas; writing them from
one description keeps them identical. Edit this file, run it, commit both the
script and its output:

    python3 crds/generate_crds.py

Field names and defaults follow operator/api/types.h. Every CEL rule either sits
on the field it checks or names it with fieldPath, so the API server's error
starts with the field's path ("spec.allocator.glibc: Invalid value: ...").
"""

import os
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# Go-style durations limited to ms, s, m and h: "15m", "2s", "1h30m", "1.5h".
DURATION = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
# Byte quantities: no sign, no exponent, no milli suffix.
QUANTITY = r"^([0-9]+(\.[0-9]+)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$"
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"


def rule(expr, message, field_path=None):
    r = {"rule": expr, "message": message}
    if field_path:
        r["fieldPath"] = field_path
    return r


def string(desc, **kw):
    return {"type": "string", "description": desc, **kw}


def integer(desc, **kw):
    return {"type": "integer", "description": desc, **kw}


def number(desc, **kw):
    return {"type": "number", "description": desc, **kw}


def obj(desc, props, required=None, rules=None, **kw):
    o = {"type": "object", "description": desc, "properties": props}
    if required:
        o["required"] = required
    if rules:
        o["x-kubernetes-validations"] = rules
    o.update(kw)
    return o


def duration(desc, minimum="1ms", maximum=None, default=None):
    # CEL's duration() accepts what the pattern accepts; the guard keeps a
    # malformed value to the pattern's message alone.
    guard = "!self.matches('%s') || " % DURATION.replace("\\", "\\\\")
    rules = [rule(guard + "duration(self) >= duration('%s')" % minimum,
                  "must be at least %s" % minimum)]
    if maximum:
        rules.append(rule(guard + "duration(self) <= duration('%s')" % maximum,
                          "must be at most %s" % maximum))
    d = string(desc + " A duration such as 90s, 15m or 1h30m.", pattern=DURATION,
               maxLength=32)
    d["x-kubernetes-validations"] = rules
    if default is not None:
        d["default"] = default
    return d


def quantity(desc, positive=True, maximum=None, default=None):
    """An int-or-string byte quantity ("512Mi", "1.5Gi", 1048576)."""
    q = {
        "description": desc + " A byte quantity such as 512Mi or 2Gi.",
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": QUANTITY,
        "maxLength": 64,
    }
    # string(self) makes an integer a quantity too; the isQuantity guard leaves
    # a malformed string to the pattern's message.
    q_self = "quantity(string(self))"
    guard = "!isQuantity(string(self)) || "
    rules = []
    if positive:
        rules.append(rule(guard + q_self + ".isGreaterThan(quantity('0'))", "must be positive"))
    else:
        rules.append(rule(guard + "!" + q_self + ".isLessThan(quantity('0'))",
                          "must not be negative"))
    if maximum:
        rules.append(rule(guard + "!" + q_self + ".isGreaterThan(quantity('%s'))" % maximum,
                          "must be at most %s" % maximum))
    q["x-kubernetes-validations"] = rules
    if default is not None:
        q["default"] = default
    return q


def string_map(desc, max_props, key_re, key_msg, value_re, value_msg, value_max=256):
    return {
        "type": "object",
        "description": desc,
        "additionalProperties": {"type": "string", "maxLength": value_max},
        "maxProperties": max_props,
        "x-kubernetes-validations": [
            rule("self.all(k, k.matches('%s'))" % key_re.replace("\\", "\\\\"), key_msg),
            rule("self.all(k, self[k].matches('%s'))" % value_re.replace("\\", "\\\\"),
                 value_msg),
        ],
    }


# --- shared sub-schemas -------------------------------------------------------

def allocator_spec(desc):
    names = ["glibc", "jemalloc", "mimalloc", "tcmalloc"]
    tunables = {
        "glibc": obj("glibc malloc tunables, set as MALLOC_* environment variables.", {
            "arenaMax": integer("MALLOC_ARENA_MAX: the most malloc arenas glibc creates "
                                "(default 8 per online CPU).", minimum=1, maximum=4096),
            "trimThreshold": quantity("MALLOC_TRIM_THRESHOLD_: free memory at the top of the "
                                      "heap above which glibc returns it to the system.",
                                      positive=False),
            "mmapThreshold": quantity("MALLOC_MMAP_THRESHOLD_: allocations at least this large "
                                      "are served by mmap. glibc's maximum on 64-bit is 32Mi.",
                                      positive=False, maximum="32Mi"),
        }),
        "jemalloc": obj("jemalloc tunables.", {
            "mallocConf": string(
                "MALLOC_CONF, comma-separated option:value pairs, e.g. "
                "background_thread:true,dirty_decay_ms:1000. No $ (the kubelet expands "
                "$(VAR) in env values), backticks or control characters.",
                maxLength=1024,
                pattern=r"^[a-z0-9_]+:[^,:\s$`\x00-\x1f\x7f]+(,[a-z0-9_]+:[^,:\s$`\x00-\x1f\x7f]+)*$"),
        }),
        "mimalloc": obj("mimalloc tunables.", {
            "options": string_map(
                "mimalloc options by name; purge_delay: \"0\" sets MIMALLOC_PURGE_DELAY=0.",
                32, r"^[a-z][a-z0-9_]{0,63}$",
                "option names are lower-case mimalloc option names such as purge_delay",
                r"^[A-Za-z0-9_.:-]+$",
                "option values are non-empty and made of letters, digits and _ . : -", 256),
        }),
        "tcmalloc": obj("gperftools tcmalloc tunables.", {
            "releaseRate": number("TCMALLOC_RELEASE_RATE: how fast freed memory is returned "
                                  "(0 never, 10 most eagerly; default 1).",
                                  minimum=0, maximum=10),
            "maxTotalThreadCacheBytes": quantity("TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES: the "
                                                 "bound on all thread caches together."),
        }),
    }
    props = {"name": string("The allocator: glibc, jemalloc, mimalloc or tcmalloc.",
                            enum=names)}
    props.update(tunables)
    rules = [
        rule("!has(self.%s) || self.name == '%s'" % (n, n),
             "%s tunables are allowed only when name is %s" % (n, n), "." + n)
        for n in names
    ]
    return obj(desc, props, required=["name"], rules=rules)


def load_spec():
    request = obj("One request of the mix.", {
        "name": string("Name of the request in reports; unique. Default request-<index>.",
                       maxLength=63, pattern=r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"),
        "method": string("HTTP method.", enum=["GET", "POST", "PUT", "DELETE", "PATCH"],
                         default="GET"),
        "path": string("Request path, starting with /; {key} is replaced by a key drawn from "
                       "1..keySpace.", maxLength=2048, pattern=r"^/"),
        "body": string("Request body; {key} is replaced as in path.", maxLength=65536),
        "contentType": string("Content-Type of the body.", maxLength=256),
        "weight": number("Relative frequency of this request in the mix; positive.",
                         minimum=0, exclusiveMinimum=True, default=1),
        "keySpace": integer("Number of distinct keys substituted for {key}.",
                            minimum=1, default=1),
        "expect": {
            "type": "array",
            "description": "HTTP status codes that count as success. Default [200].",
            "items": {"type": "integer", "minimum": 100, "maximum": 599},
            "minItems": 1,
            "maxItems": 16,
            "x-kubernetes-list-type": "set",
            "default": [200],
        },
    }, required=["path"])
    return obj("The deterministic request mix the canary drives against the workload over "
               "localhost.", {
        "port": integer("The workload's HTTP port inside the pod.", minimum=1, maximum=65535,
                        default=8080),
        "rate": number("Requests per second.", minimum=0, exclusiveMinimum=True,
                       maximum=1000000, default=10),
        "workers": integer("Concurrent connections.", minimum=1, maximum=1024, default=4),
        "seed": integer("Seed of the request schedule; the same seed gives the same requests "
                        "under every variant.", minimum=0, default=1),
        "arrival": string("Arrival process.", enum=["poisson", "uniform"], default="poisson"),
        "ready": obj("The probe the driver waits for before it starts the load.", {
            "path": string("Path that answers 2xx once the workload is ready.", maxLength=2048,
                           pattern=r"^/", default="/"),
            "timeout": duration("How long to wait for the workload to become ready.",
                                default="60s"),
        }, default={}),
        "lateAfter": duration("A request that starts later than this after its scheduled time "
                              "counts as late.", default="1s"),
        "requestTimeout": duration("Timeout of one request.", default="30s"),
        "requests": {
            "type": "array",
            "description": "The request mix; required unless rollout.mode is Off.",
            "items": request,
            "minItems": 1,
            "maxItems": 64,
            "x-kubernetes-validations": [
                rule("self.all(r, !has(r.name) || self.filter(o, has(o.name) && "
                     "o.name == r.name).size() == 1)",
                     "request names must be unique"),
            ],
        },
    }, default={})


def canary_spec():
    variant = obj("A variant run beside the candidate on the identical load.", {
        "name": string("DNS label naming the variant; \"candidate\" is reserved.",
                       maxLength=30, pattern=DNS_LABEL),
        "allocator": allocator_spec("The variant's allocator and tunables."),
    }, required=["name", "allocator"], rules=[
        rule("self.name != 'candidate'", "the name \"candidate\" is reserved for the "
             "template as injected", ".name"),
    ])
    # has(): the default {} is validated before nested defaults fill it in.
    guard = ("!has(self.sampleInterval) || !has(self.duration) || "
             "!self.sampleInterval.matches('%s') || !self.duration.matches('%s') || ") % (
        DURATION.replace("\\", "\\\\"), DURATION.replace("\\", "\\\\"))
    max_guard = ("!has(self.maxDuration) || !has(self.duration) || "
                 "!self.maxDuration.matches('%s') || !self.duration.matches('%s') || ") % (
        DURATION.replace("\\", "\\\\"), DURATION.replace("\\", "\\\\"))
    return obj("How the replay canary runs.", {
        "duration": duration("How long each variant runs.", minimum="1m", maximum="24h",
                             default="15m"),
        "maxDuration": duration("How long a variant may run on while its verdict is still "
                                "unclear at duration: the judge spends most of its error budget "
                                "by duration and the rest up to maxDuration. Default: 30m, or "
                                "duration when that is longer.", minimum="1m", maximum="24h"),
        "inconclusiveReruns": integer("How many times a candidate whose run ended "
                                      "Inconclusive is run again, each time with the next load "
                                      "seed, before the canary's verdict is Inconclusive (which "
                                      "holds the rollout in Enforce).", minimum=0, maximum=3,
                                      default=1),
        "sampleInterval": duration("How often memory is sampled.", minimum="100ms",
                                   maximum="1h", default="2s"),
        "load": load_spec(),
        "variants": {
            "type": "array",
            "description": "Variants run beside the candidate on the identical load, so that a "
                           "ratchet can be classified. Default: one glibc baseline; with "
                           "bakeOff, the bake-off matrix (docs/replay.md). Not defaulted "
                           "here: the operator applies the default, so that it can tell a "
                           "bake-off without variants.",
            "items": variant,
            "maxItems": 8,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
        "bakeOff": {"type": "boolean",
                    "description": "Rank the candidate and every variant (Flat first, then floor "
                                   "level, CPU per request, p99 latency) with their costs "
                                   "against the candidate, and recommend one with an allocator "
                                   "snippet in status.recommendation. Without variants, runs the "
                                   "bake-off matrix of `allocguard replay --bake-off` less the "
                                   "candidate's own allocator. The verdict, and so the hold, "
                                   "stays the candidate's."},
        "nodeSelector": string_map(
            "Node labels canary pods must match: nodes like production's, so a glibc variant "
            "sees production's arena limit (8 per online CPU).", 32, LABEL_KEY,
            "node selector keys must be valid label keys", LABEL_VALUE,
            "node selector values must be valid label values", 63),
        "productionCPUs": integer("Online CPUs of production's nodes: a glibc variant gets "
                                  "MALLOC_ARENA_MAX = 8 x productionCPUs.",
                                  minimum=1, maximum=4096),
    }, rules=[
        rule(guard + "duration(self.sampleInterval) < duration(self.duration)",
             "sampleInterval must be shorter than duration", ".sampleInterval"),
        rule(max_guard + "duration(self.maxDuration) >= duration(self.duration)",
             "maxDuration must not be shorter than duration", ".maxDuration"),
    ], default={})


def limits_spec():
    return obj("Memory limits the canary judges against.", {
        "memory": quantity("The container memory limit to check the canary's peak against."),
        "maxFloorSlopePerHour": quantity("The largest growth of the memory floor per hour that "
                                         "still counts as flat.", default="512Mi"),
    }, default={})


def label_selector():
    requirement = obj("A label selector requirement.", {
        "key": string("The label key.", maxLength=317, pattern=LABEL_KEY),
        "operator": string("In, NotIn, Exists or DoesNotExist.",
                           enum=["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": {
            "type": "array",
            "description": "Values for In and NotIn; empty for Exists and DoesNotExist.",
            "items": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE},
            "maxItems": 64,
            "x-kubernetes-list-type": "atomic",
        },
    }, required=["key", "operator"], rules=[
        rule("(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
             "values must be non-empty for In and NotIn and empty for Exists and DoesNotExist",
             ".values"),
    ])
    return obj("Which pods (and the Deployments whose templates make them) the policy governs. "
               "Must not be empty.", {
        "matchLabels": string_map("Labels a pod must carry.", 64, LABEL_KEY,
                                  "matchLabels keys must be valid label keys", LABEL_VALUE,
                                  "matchLabels values must be valid label values", 63),
        "matchExpressions": {
            "type": "array",
            "items": requirement,
            "maxItems": 32,
            "x-kubernetes-list-type": "atomic",
        },
    }, rules=[
        rule("(has(self.matchLabels) && size(self.matchLabels) > 0) || "
             "(has(self.matchExpressions) && size(self.matchExpressions) > 0)",
             "must not be empty: an empty selector would govern every pod in the namespace"),
    ], **{"x-kubernetes-map-type": "atomic"})


# --- status -------------------------------------------------------------------

def conditions():
    return {
        "type": "array",
        "description": "Conditions in metav1.Condition form.",
        "items": obj("A condition.", {
            "type": string("Condition type.", maxLength=316),
            "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
            "reason": string("A CamelCase reason.", maxLength=1024),
            "message": string("A human readable message.", maxLength=32768),
            "lastTransitionTime": string("When the status last changed.", format="date-time"),
            "observedGeneration": integer("The generation the condition was set for.",
                                          minimum=0, format="int64"),
        }, required=["type", "status", "reason", "message", "lastTransitionTime"]),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    }


# api::WorkloadKind (operator/api/workload_kinds.h).
WORKLOAD_KINDS = ["Deployment", "StatefulSet", "DaemonSet"]
VERDICTS = ["Flat", "Ratchet", "AllocatorRetention", "Leak", "OOMKilled", "Errors",
            "Inconclusive", "Failed"]


def verdict_record(desc):
    return obj(desc, {
        "workload": string("The governed workload, kind/name."),
        "templateHash": string("The pod template's key."),
        "canary": string("The ReplayCanary that judged it."),
        "verdict": string("The canary's verdict."),
        "floorSlope": string("Floor slope of the candidate, e.g. \"+0.12 GiB/h\"."),
        "flatVariant": string("A variant that was flat when the candidate was not."),
        "explanation": string("One line that says what happened and what to do."),
        "time": string("When the verdict arrived.", format="date-time"),
    })


def policy_status():
    return obj("Observed state, written by the operator.", {
        "observedGeneration": integer("The generation last reconciled.", format="int64"),
        "conditions": conditions(),
        "governedCount": integer("How many workloads the policy governs."),
        "governed": {
            "type": "array",
            "description": "The workloads whose pod template the selector matches, of the kinds "
                           "whose rollouts the policy gates (at most 50; governedCount counts "
                           "all).",
            "items": obj("A governed workload.", {
                "kind": string("Kind.", enum=WORKLOAD_KINDS),
                "name": string("Name.", minLength=1),
                "namespace": string("Namespace."),
            }, required=["kind", "name", "namespace"]),
            "x-kubernetes-list-type": "atomic",
        },
        "lastVerdict": verdict_record("The most recent canary verdict."),
        "verdicts": {
            "type": "array",
            "description": "The latest verdict per workload and template hash.",
            "items": verdict_record("A verdict."),
            "x-kubernetes-list-type": "atomic",
        },
        "injectionDrift": {
            "type": "array",
            "description": "Governed pods running without the injection.",
            "items": obj("A drifted pod.", {
                "pod": string("Pod name."),
                "reason": string("Why it is not injected."),
            }),
            "x-kubernetes-list-type": "atomic",
        },
        "injectionSuspended": {
            "type": "array",
            "description": "Pod templates the circuit breaker stopped injecting into: their pods "
                           "failed to start with the allocator preloaded. New pods of such a "
                           "template are admitted without the allocator until the template or "
                           "the policy changes.",
            "items": obj("A suspended pod template.", {
                "workload": string("The workload, kind/name (Deployment/web, StatefulSet/db, "
                                   "Job/migrate), or Pod for pods without a controller."),
                "podTemplateHash": string("The revision of its pods: pod-template-hash of a "
                                          "Deployment's, controller-revision-hash of a "
                                          "StatefulSet's or DaemonSet's, the controller's uid "
                                          "for other kinds, the digest of the containers for "
                                          "a pod without a controller."),
                "templateHash": string("Digest of the Deployment's, StatefulSet's or "
                                       "DaemonSet's pod template when suspended (a different "
                                       "one resumes injection); for other kinds the same as "
                                       "podTemplateHash."),
                "policyGeneration": integer("The policy generation it applies to; a newer "
                                            "generation resumes injection.", format="int64"),
                "pod": string("The pod whose failure tripped the breaker."),
                "container": string("Its container that failed to start."),
                "reason": string("Why, CamelCase (LoaderError)."),
                "message": string("The loader's message from the container's termination "
                                  "message."),
                "since": string("When injection was suspended.", format="date-time"),
            }),
            "x-kubernetes-list-type": "atomic",
        },
    })


BOOKS_READINGS = ["TooFewMinutes", "Unclear", "Flat", "Retention", "Leak"]


def books_status():
    mib_list = lambda desc: {"type": "array", "items": {"type": "number"}, "description": desc,
                             "x-kubernetes-list-type": "atomic"}
    return obj("The allocator's books over the run (the stats agent's in-use and retained "
               "bytes, docs/allocator-books.md); absent when it recorded none. They explain the "
               "verdict and never change it.", {
                   "reading": string("What they showed: Retention (in-use flat, retained "
                                     "climbing), Leak (in-use climbing), Flat, Unclear, or "
                                     "TooFewMinutes.", enum=BOOKS_READINGS),
                   "inUseFloorsMiB": mib_list("Per-minute floors of the bytes the program has "
                                              "in use, in MiB."),
                   "retainedFloorsMiB": mib_list("Per-minute floors of the bytes the allocator "
                                                 "holds free, in MiB."),
                   "inUseSlopeGiBPerHour": number("Least-squares slope of the in-use floors."),
                   "retainedSlopeGiBPerHour": number("Least-squares slope of the retained "
                                                     "floors."),
               })


def canary_status():
    earlier_run = obj("One earlier run of a variant.", {
        "job": string("The Job that ran it."),
        "seed": integer("Its load seed.", format="int64"),
        "verdict": string("Its verdict."),
        "floorsMiB": {"type": "array", "items": {"type": "number"},
                      "description": "Its per-minute memory floors in MiB.",
                      "x-kubernetes-list-type": "atomic"},
        "floorSlopeGiBPerHour": number("Least-squares slope of its floors."),
        "slopeLowGiBPerHour": number("Lower confidence bound of the slope."),
        "slopeHighGiBPerHour": number("Upper confidence bound of the slope."),
        "requests": integer("Requests sent.", format="int64"),
        "late": integer("Requests started late.", format="int64"),
        "message": string("The judge's explanation."),
        "books": books_status(),
    })
    variant = obj("Result of one variant.", {
        "name": string("Variant name (\"candidate\" for the template as injected)."),
        "allocator": string("Allocator name."),
        "job": string("The Job that ran it."),
        "phase": string("Pending, Running, Completed or Failed."),
        "verdict": string("The variant's own verdict."),
        "floorsMiB": {"type": "array", "items": {"type": "number"},
                      "description": "Per-minute memory floors in MiB.",
                      "x-kubernetes-list-type": "atomic"},
        "floorSlopeGiBPerHour": number("Least-squares slope of the floors."),
        "slopeLowGiBPerHour": number("Lower confidence bound of the slope."),
        "slopeHighGiBPerHour": number("Upper confidence bound of the slope."),
        "peakMiB": number("Peak memory."),
        "recommendedLimitMiB": number("A container limit that fits the peak."),
        "floorLevelMiB": number("The floor level: the median per-minute floor."),
        "cpuSeconds": number("CPU seconds the workload used over the run."),
        "p99Milliseconds": number("p99 latency of the workload's responses."),
        "requests": integer("Requests sent.", format="int64"),
        "errors": integer("Responses outside the expected codes.", format="int64"),
        "late": integer("Requests started late.", format="int64"),
        "oomKilled": {"type": "boolean", "description": "Killed by the OOM killer."},
        "oomMinute": integer("Minute of the OOM kill."),
        "message": string("What went wrong, if anything."),
        "startFailure": string("The loader's message when the workload could not start "
                               "under this variant's allocator."),
        "measurementKey": string("Digest of everything the result depends on (template, "
                                 "allocator, load, duration, sampling, placement, limits, "
                                 "containers)."),
        "reusedFrom": string("The canary that measured this result with identical inputs; "
                             "set when the variant was not run again."),
        "seed": integer("The load seed of this run (the policy's seed, plus the rerun's "
                        "number for a rerun).", format="int64"),
        "books": books_status(),
        "earlierRuns": {
            "type": "array",
            "description": "The runs of this variant before the one above, oldest first: "
                           "a run that ended Inconclusive is run again with the next seed "
                           "(canary.inconclusiveReruns).",
            "items": earlier_run,
            "maxItems": 3,
            "x-kubernetes-list-type": "atomic",
        },
    })
    return obj("Observed state, written by the operator.", {
        "observedGeneration": integer("The generation last reconciled.", format="int64"),
        "phase": string("Where the run is.", enum=["Pending", "Running", "Completed", "Failed"]),
        "verdict": string("The overall verdict.", enum=VERDICTS),
        "explanation": string("One line: what happened and what to do."),
        "floorSlope": string("Floor slope of the candidate, e.g. \"+0.12 GiB/h\"."),
        "flatVariant": string("A variant that was flat when the candidate was not."),
        "queuePosition": integer("While Pending for a canary slot: the position in the queue "
                                 "(1: next to start; round-robin over namespaces)."),
        "startTime": string("When the first variant started.", format="date-time"),
        "completionTime": string("When the verdict was reached.", format="date-time"),
        "arenaLimit": obj("How a glibc variant was given production's arena limit.", {
            "source": string("NodeSelector, ArenaMaxEnv or CanaryNode.",
                             enum=["NodeSelector", "ArenaMaxEnv", "CanaryNode"]),
            "value": integer("The arena limit in effect (MALLOC_ARENA_MAX or 8 x CPUs)."),
            "productionCPUs": integer("Production's CPUs the limit was derived from."),
        }),
        "conditions": conditions(),
        "variants": {"type": "array", "items": variant, "x-kubernetes-list-type": "atomic"},
        "recommendation": recommendation_status(),
    })


def recommendation_status():
    row = obj("One variant, ranked, with its costs against the candidate.", {
        "rank": integer("1 = best."),
        "variant": string("The variant (a status.variants name)."),
        "allocator": string("Allocator name."),
        "verdict": string("The variant's own verdict.", enum=VERDICTS),
        "floorMiB": number("Its floor level (median per-minute floor) in MiB."),
        "cpuMsPerRequest": number("CPU milliseconds per completed request."),
        "p99Milliseconds": number("p99 latency."),
        "floorChangePercent": number("Floor level against the candidate's, in percent."),
        "cpuChangePercent": number("CPU per request against the candidate's, in percent."),
        "p99ChangePercent": number("p99 latency against the candidate's, in percent."),
        "costs": string("The changes in words: \"floor -62 %, CPU +18 %, p99 +9 %\"."),
    })
    return obj("A bake-off canary's ranking and recommendation (spec.canary.bakeOff), once "
               "Completed. It advises: the verdict and the hold are the candidate's.", {
        "current": string("The variant every cost is against: the candidate."),
        "recommended": string("The first-ranked Flat variant; absent when no variant was "
                              "Flat."),
        "message": string("What to do, and what it costs."),
        "policySnippet": string("An AllocatorPolicy spec.allocator (YAML) for the "
                                "recommendation."),
        "ranked": {"type": "array", "items": row, "maxItems": 9,
                   "x-kubernetes-list-type": "atomic"},
    })


# --- the two CRDs ---------------------------------------------------------------

def crd(plural, kind, short_names, schema, columns):
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "%s.allocguard.io" % plural},
        "spec": {
            "group": "allocguard.io",
            "names": {
                "kind": kind,
                "listKind": kind + "List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
                "categories": ["allocguard"],
            },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1alpha1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "additionalPrinterColumns": columns,
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }


def column(name, path, type_="string", **kw):
    return {"name": name, "type": type_, "jsonPath": path, **kw}


def libc_field():
    return string("Which build of the allocator containers load: auto lets each container's "
                  "own dynamic loader pick the glibc or musl build (through the $LIB token "
                  "in LD_PRELOAD, which glibc expands and musl does not); glibc or musl "
                  "forces one. A pod annotation allocguard.io/libc overrides it. See "
                  "docs/injection.md.", enum=["auto", "glibc", "musl"], default="auto")


# musl needs a musl build, and tcmalloc (C++) has none. ALLOCATOR is the CEL
# path of the allocator (self.allocator, self.candidate.allocator).
def libc_rule(allocator):
    return rule(
        "!has(self.libc) || self.libc != 'musl' || "
        f"((!has({allocator}.name) || {allocator}.name != 'tcmalloc') && "
        "(!has(self.canary) || !has(self.canary.variants) || "
        "self.canary.variants.all(v, !has(v.allocator.name) || v.allocator.name != 'tcmalloc')))",
        "musl needs a musl build of the allocator, and tcmalloc has none: use auto or another "
        "allocator", ".libc")


def allocator_policy():
    spec = obj("What the policy governs and how.", {
        "selector": label_selector(),
        "containers": {
            "type": "array",
            "description": "Containers to inject; empty means every container of the pod.",
            "items": {"type": "string", "maxLength": 63, "pattern": DNS_LABEL},
            "maxItems": 64,
            "x-kubernetes-list-type": "set",
        },
        "allocator": allocator_spec("The allocator injected into governed pods."),
        "libc": libc_field(),
        "limits": limits_spec(),
        "canary": canary_spec(),
        "rollout": obj("How rollouts are gated.", {
            "mode": string("Enforce holds a changed template until its canary is flat; Audit "
                           "runs canaries and reports without holding; Off does nothing.",
                           enum=["Enforce", "Audit", "Off"], default="Audit"),
        }, default={}),
        "guard": obj("The guard sidecar in governed pods.", {
            "enabled": {"type": "boolean", "description": "Run the guard sidecar.",
                        "default": False},
            "threshold": quantity("Anonymous plus dirty memory above which the guard acts."),
            "action": string("What the guard does above the threshold.",
                             enum=["None", "Backpressure", "Restart"], default="None"),
        }, rules=[
            rule("!has(self.action) || self.action == 'None' || has(self.threshold)",
                 "threshold is required when action is Backpressure or Restart", ".threshold"),
            rule("!has(self.action) || self.action == 'None' || (has(self.enabled) && self.enabled)",
                 "action needs enabled: true (the guard sidecar acts)", ".action"),
        ], default={}),
        "stats": obj("The stats agent (liballocguard_stats.so), preloaded beside the allocator: "
                     "it publishes the allocator's own books (bytes in use, bytes retained) for "
                     "the guard. See docs/allocator-books.md.", {
            "enabled": {"type": "boolean",
                        "description": "Preload the stats agent. Absent: on exactly when "
                                       "guard.enabled is true."},
        }),
    }, required=["selector", "allocator"], rules=[
        libc_rule("self.allocator"),
        rule("self.rollout.mode == 'Off' || has(self.canary.load.requests)",
             "canary.load.requests is required unless rollout.mode is Off",
             ".canary.load.requests"),
        rule("!has(self.guard.threshold) || !has(self.limits.memory) || "
             "!isQuantity(string(self.guard.threshold)) || "
             "!isQuantity(string(self.limits.memory)) || "
             "quantity(string(self.guard.threshold)).isLessThan("
             "quantity(string(self.limits.memory)))",
             "guard.threshold must be below limits.memory", ".guard.threshold"),
    ])
    schema = obj("AllocatorPolicy puts an allocator on the pods it selects and holds their "
                 "rollouts until a replay canary shows the memory floor flat.", {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec,
        "status": policy_status(),
    }, required=["spec"])
    columns = [
        column("Allocator", ".spec.allocator.name"),
        column("Mode", ".spec.rollout.mode"),
        column("Verdict", ".status.lastVerdict.verdict"),
        column("Floor Slope", ".status.lastVerdict.floorSlope"),
        column("Governed", ".status.governedCount", "integer"),
        column("Ready", ".status.conditions[?(@.type==\"Ready\")].status"),
        column("Age", ".metadata.creationTimestamp", "date"),
    ]
    return crd("allocatorpolicies", "AllocatorPolicy", ["agpolicy", "agp"], schema, columns)


def replay_canary():
    spec = obj("Everything the run needs, snapshotted so that a later policy edit does not "
               "change a canary in flight. Immutable.", {
        "policyRef": obj("The AllocatorPolicy that asked for this canary, if any.", {
            "name": string("Policy name.", maxLength=253),
        }, required=["name"]),
        "target": obj("The workload whose candidate template is judged.", {
            "kind": string("Workload kind.", enum=["Deployment", "StatefulSet", "DaemonSet"],
                           default="Deployment"),
            "name": string("Workload name.", maxLength=253),
        }, required=["name"]),
        "templateHash": string("The candidate template's key.", maxLength=63),
        "template": {
            "type": "object",
            "description": "The candidate's pod template (a PodTemplateSpec) as it would be "
                           "admitted, before allocguard's injection.",
            "x-kubernetes-preserve-unknown-fields": True,
        },
        "candidate": obj("The allocator the candidate runs with.", {
            "allocator": allocator_spec("The candidate's allocator and tunables."),
        }, required=["allocator"]),
        "libc": libc_field(),
        "canary": canary_spec(),
        "limits": limits_spec(),
    }, required=["template", "candidate"], rules=[
        libc_rule("self.candidate.allocator"),
        rule("has(self.canary.load.requests)", "canary.load.requests is required",
             ".canary.load.requests"),
        rule("self == oldSelf", "spec is immutable: create a new ReplayCanary instead"),
    ])
    schema = obj("ReplayCanary runs a candidate pod template and its variants under an "
                 "identical replayed load and judges whether the memory floor is flat.", {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec,
        "status": canary_status(),
    }, required=["spec"])
    columns = [
        column("Target", ".spec.target.name"),
        column("Verdict", ".status.verdict"),
        column("Floor Slope", ".status.floorSlope"),
        column("Phase", ".status.phase"),
        column("Recommended", ".status.recommendation.recommended", priority=1),
        column("Age", ".metadata.creationTimestamp", "date"),
    ]
    return crd("replaycanaries", "ReplayCanary", ["agcanary", "agc"], schema, columns)


class Dumper(yaml.SafeDumper):
    pass


def _str(dumper, data):
    style = '"' if any(c in data for c in "\\'\n") or data != data.strip() else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


Dumper.add_representer(str, _str)


# The Helm chart ships the same CRDs as templates (charts/allocguard/
# templates/crds.yaml), not in the chart's crds/ folder, which Helm installs
# once and never upgrades: as templates they are upgraded by helm upgrade,
# rendered only with crds.install and kept on helm uninstall with crds.keep
# (docs/install.md, "CRDs"). charts/tests/chart_controlplane_test.sh fails if
# what the chart renders differs from the files here.
CHART_TEMPLATE = os.path.join(HERE, "..", "charts", "allocguard", "templates", "crds.yaml")
HEADER = "# Generated by crds/generate_crds.py; edit that and re-run it.\n"
# What the chart adds to each CRD's metadata, after its name.
CHART_METADATA = """  labels:
    {{- include "allocguard.labels" $ | nindent 4 }}
  {{- if $.Values.crds.keep }}
  annotations:
    # helm uninstall leaves the CRD, and so every AllocatorPolicy and
    # ReplayCanary, in place (crds.keep).
    helm.sh/resource-policy: keep
  {{- end }}
"""


def dump(doc):
    return yaml.dump(doc, Dumper=Dumper, sort_keys=False, width=100, default_flow_style=False)


def write(docs):
    for name, doc in docs:
        path = os.path.normpath(os.path.join(HERE, name))
        with open(path, "w") as f:
            f.write(HEADER)
            f.write(dump(doc))
        print("wrote", path)
    parts = [HEADER, "{{- if .Values.crds.install }}\n"]
    for _, doc in docs:
        text = dump(doc)
        name_line = "  name: %s\n" % doc["metadata"]["name"]
        if "{{" in text or name_line not in text:
            raise SystemExit("generate_crds.py: cannot template %s" % doc["metadata"]["name"])
        parts.append("---\n" + text.replace(name_line, name_line + CHART_METADATA, 1))
    parts.append("{{- end }}\n")
    path = os.path.normpath(CHART_TEMPLATE)
    with open(path, "w") as f:
        f.write("".join(parts))
    print("wrote", path)


if __name__ == "__main__":
    write([("allocguard.io_allocatorpolicies.yaml", allocator_policy()),
           ("allocguard.io_replaycanaries.yaml", replay_canary())])
