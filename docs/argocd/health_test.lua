-- Runs the Argo CD health checks in this folder against sample objects, as
-- Argo CD does (the object as the global `obj`), and checks that
-- docs/gitops.md quotes each script verbatim.
--   lua5.4 docs/argocd/health_test.lua      (from the repository root)
local dir = arg[0]:match("^(.*)/[^/]*$") or "."

local function read(path)
  local f = assert(io.open(path, "r"))
  local text = f:read("a")
  f:close()
  return text
end

local function health(script, object)
  obj = object
  return assert(load(read(dir .. "/" .. script), script, "t"))()
end

local function cond(type, status, reason, message)
  return { type = type, status = status, reason = reason, message = message or "" }
end

local failures = 0
local function expect(script, name, object, status, message_part)
  local ran, hs = pcall(health, script, object)
  if not ran then hs = { status = "raised", message = tostring(hs) } end
  local ok = hs.status == status and (message_part == nil or hs.message:find(message_part, 1, true))
  print(string.format("%s %s / %s: %s (%s)", ok and "ok  " or "FAIL", script, name, hs.status, hs.message))
  if not ok then failures = failures + 1 end
end

local function policy(generation, observed, conditions)
  return { metadata = { name = "p", generation = generation },
           status = { observedGeneration = observed, conditions = conditions } }
end

local P = "allocatorpolicy-health.lua"
local ready = cond("Ready", "True", "Accepted", "governs 1 workload(s) with jemalloc; rollout mode Enforce")
expect(P, "no status yet", { metadata = { name = "p", generation = 1 } }, "Progressing")
expect(P, "old generation", policy(2, 1, { ready }), "Progressing", "generation 2")
expect(P, "accepted", policy(1, 1, { ready, cond("RolloutBlocked", "False", "NothingHeld"),
                                    cond("InjectionDrift", "False", "AllInjected") }), "Healthy", "governs 1")
expect(P, "canary running", policy(1, 1, { ready, cond("RolloutBlocked", "False", "CanaryRunning",
                                    "waiting for canaries of web") }), "Healthy", "waiting for canaries")
expect(P, "invalid spec", policy(1, 1, { cond("Ready", "False", "InvalidSpec", "bad selector") }),
       "Degraded", "InvalidSpec: bad selector")
expect(P, "rollout held", policy(1, 1, { ready, cond("RolloutBlocked", "True", "CanaryNotFlat", "held: web") }),
       "Suspended", "rollout held: web")
expect(P, "held and drifting", policy(1, 1, { ready, cond("RolloutBlocked", "True", "CanaryNotFlat", "held: web"),
                                    cond("InjectionDrift", "True", "PodsNotInjected", "1 Pod without") }),
       "Degraded", "1 Pod without")
expect(P, "breaker tripped", policy(1, 1, { ready, cond("InjectionFailing", "True", "LoaderError",
                                    "web-7d9c: GLIBC_2.34 not found") }), "Degraded", "LoaderError: web-7d9c")
-- Whatever else wrote the object, the script answers and never raises.
expect(P, "Ready without reason or message", policy(1, 1, { { type = "Ready", status = "False" } }),
       "Degraded", "Ready is False")
expect(P, "Ready without reason", policy(1, 1, { { type = "Ready", status = "False", message = "bad" } }),
       "Degraded", "bad")
expect(P, "Ready True without message", policy(1, 1, { { type = "Ready", status = "True" } }), "Healthy")
expect(P, "conditions of other types", policy(1, 1, { 5, "Ready", { status = "True" }, { type = 7 } }),
       "Degraded", "no Ready condition")
expect(P, "conditions not a list", { metadata = { generation = 1 }, status = { conditions = "Ready" } },
       "Progressing", "waiting")
expect(P, "status not an object", { metadata = { generation = 1 }, status = "ok" }, "Progressing", "waiting")
expect(P, "no metadata", { status = { conditions = { ready } } }, "Healthy")
expect(P, "RolloutBlocked without message", policy(1, 1, { ready, { type = "RolloutBlocked", status = "True" } }),
       "Suspended", "rollout")
local deleting = policy(1, 1, { ready })
deleting.metadata.deletionTimestamp = "2026-12-02T10:00:00Z"
expect(P, "being deleted", deleting, "Progressing", "being deleted")
expect(P, "injection drift", policy(1, 1, { ready, cond("InjectionDrift", "True", "PodsNotInjected",
                                    "1 governed Pod(s) run without the allocator injection") }), "Degraded", "without")

local function canary(status)
  return { metadata = { name = "web-1a2b-3c4d" }, status = status }
end
local C = "replaycanary-health.lua"
expect(C, "no status yet", canary(nil), "Progressing", "Pending")
expect(C, "queued", canary({ phase = "Pending", explanation = "queued: 2 canaries are running" }), "Progressing", "queued")
expect(C, "running", canary({ phase = "Running" }), "Progressing", "Running")
expect(C, "flat", canary({ phase = "Completed", verdict = "Flat", floorSlope = "+0.01 GiB/h" }), "Healthy", "+0.01")
expect(C, "ratchet", canary({ phase = "Completed", verdict = "AllocatorRetention", explanation = "glibc ratchets",
                               flatVariant = "jemalloc" }), "Degraded", "variant jemalloc stayed flat")
expect(C, "variant failed", canary({ phase = "Completed", verdict = "Failed", explanation = "exited 1" }),
       "Degraded", "Failed: exited 1")
expect(C, "invalid", canary({ phase = "Failed", verdict = "Failed", explanation = "invalid ReplayCanary" }),
       "Degraded", "invalid")
expect(C, "completed without verdict or explanation", canary({ phase = "Completed" }), "Degraded", "no verdict")
expect(C, "fields of other types", canary({ phase = "Completed", verdict = "Flat", floorSlope = 0.1 }),
       "Healthy", "Flat")
expect(C, "explanation of another type", canary({ phase = "Running", explanation = { 1 } }),
       "Progressing", "Running")
expect(C, "status not an object", canary("done"), "Progressing", "Pending")
expect(C, "no metadata", { status = { phase = "Completed", verdict = "Flat" } }, "Healthy")
local terminating = canary({ phase = "Running" })
terminating.metadata.deletionTimestamp = "2026-12-02T10:00:00Z"
expect(C, "being deleted", terminating, "Progressing", "being deleted")

local function statefulset(annotations, spec, status)
  return { metadata = { name = "db", generation = 2, annotations = annotations }, spec = spec, status = status }
end
local S = "statefulset-health.lua"
local steady = { observedGeneration = 2, readyReplicas = 3, updatedReplicas = 3,
                 currentRevision = "db-1", updateRevision = "db-1" }
local rolling3 = { replicas = 3, updateStrategy = { type = "RollingUpdate" } }
expect(S, "steady", statefulset(nil, rolling3, steady), "Healthy", "3 pod(s) at revision db-1")
expect(S, "spec not observed", statefulset(nil, rolling3, { observedGeneration = 1 }), "Progressing", "observe")
expect(S, "no status", statefulset(nil, rolling3, nil), "Progressing", "observe")
expect(S, "rolling", statefulset(nil, rolling3, { observedGeneration = 2, readyReplicas = 3, updatedReplicas = 1,
                                  currentRevision = "db-1", updateRevision = "db-2" }), "Progressing", "1 pod(s) at revision db-2")
expect(S, "pods not ready", statefulset(nil, rolling3, { observedGeneration = 2, readyReplicas = 1 }),
       "Progressing", "2 pod(s)")
-- The hold pins the partition above any replica count: Argo CD's own check
-- would call this "partitioned roll out complete" with no pod on the new template.
local pinned = { replicas = 3, updateStrategy = { type = "RollingUpdate", rollingUpdate = { partition = 2147483647 } } }
expect(S, "held", statefulset({ ["allocguard.io/held-candidate"] = "8c41d2f07a" }, pinned,
                              { observedGeneration = 2, readyReplicas = 3, updatedReplicas = 0,
                                currentRevision = "db-1", updateRevision = "db-2" }),
       "Suspended", "holds template 8c41d2f07a until its replay canary is Flat; 3 of 3 pods")
expect(S, "held names the gate", statefulset({ ["allocguard.io/held-candidate"] = "8c41d2f07a" }, pinned, steady),
       "Suspended", "allocguard gate statefulset/db")
expect(S, "released", statefulset({ ["allocguard.io/released-candidate"] = "8c41d2f07a" }, rolling3, steady),
       "Healthy", "complete")
expect(S, "user's own partition", statefulset(nil, { replicas = 3, updateStrategy = { type = "RollingUpdate",
                                  rollingUpdate = { partition = 1 } } }, { observedGeneration = 2, readyReplicas = 3,
                                  updatedReplicas = 1 }), "Progressing", "1 of 2 pod(s) updated")
expect(S, "OnDelete", statefulset(nil, { replicas = 3, updateStrategy = { type = "OnDelete" } }, steady),
       "Healthy", "OnDelete")
expect(S, "replicas absent means 1", statefulset(nil, {}, { observedGeneration = 2, readyReplicas = 1,
                                  currentRevision = "a", updateRevision = "a" }), "Healthy", "1 pod(s)")
expect(S, "fields of other types", statefulset({ ["allocguard.io/held-candidate"] = 5 }, { replicas = "3",
                                  updateStrategy = "RollingUpdate" }, { observedGeneration = 2, readyReplicas = "3" }),
       "Progressing", "1 pod(s) to be ready")
expect(S, "no metadata", { status = steady }, "Healthy", "3 pod(s)")

local function daemonset(annotations, spec, status)
  return { metadata = { name = "agent", generation = 4, annotations = annotations }, spec = spec, status = status }
end
local D = "daemonset-health.lua"
local ds_steady = { observedGeneration = 4, desiredNumberScheduled = 5, updatedNumberScheduled = 5, numberAvailable = 5 }
local ds_rolling = { updateStrategy = { type = "RollingUpdate" } }
expect(D, "steady", daemonset(nil, ds_rolling, ds_steady), "Healthy", "5 pods updated and available")
expect(D, "not observed", daemonset(nil, ds_rolling, { observedGeneration = 3 }), "Progressing", "observe")
expect(D, "rolling", daemonset(nil, ds_rolling, { observedGeneration = 4, desiredNumberScheduled = 5,
                                updatedNumberScheduled = 2, numberAvailable = 5 }), "Progressing", "2 of 5 pods updated")
expect(D, "not available", daemonset(nil, ds_rolling, { observedGeneration = 4, desiredNumberScheduled = 5,
                                updatedNumberScheduled = 5, numberAvailable = 4 }), "Progressing", "4 of 5")
-- The hold switches the strategy to OnDelete: Argo CD's own check would call
-- that Healthy however few pods run the new template.
expect(D, "held", daemonset({ ["allocguard.io/held-candidate"] = "77aa01" }, { updateStrategy = { type = "OnDelete" } },
                            { observedGeneration = 4, desiredNumberScheduled = 5, updatedNumberScheduled = 0,
                              numberAvailable = 5 }), "Suspended", "holds template 77aa01 until its replay canary is Flat; 0 of 5")
expect(D, "held names the gate", daemonset({ ["allocguard.io/held-candidate"] = "77aa01" }, ds_rolling, ds_steady),
       "Suspended", "allocguard gate daemonset/agent")
expect(D, "user's OnDelete", daemonset(nil, { updateStrategy = { type = "OnDelete" } }, ds_steady), "Healthy", "OnDelete")
expect(D, "fields of other types", daemonset({ 1, 2 }, { updateStrategy = 3 }, { observedGeneration = 4,
                                desiredNumberScheduled = "5" }), "Healthy", "0 pods")
expect(D, "no metadata", { status = ds_steady }, "Healthy", "5 pods")

local guide = read(dir .. "/../gitops.md")
for _, script in ipairs({ P, C, S, D }) do
  if not guide:find(read(dir .. "/" .. script), 1, true) then
    print("FAIL docs/gitops.md does not quote " .. script .. " verbatim")
    failures = failures + 1
  end
end
if failures > 0 then
  print(failures .. " failure(s)")
  os.exit(1)
end
print("all health checks behave")
