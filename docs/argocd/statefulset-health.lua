-- Argo CD health of an apps/v1 StatefulSet, aware of allocguard's hold (docs/gitops.md).
local hs = {}
local function text(v)
  if type(v) == "string" then return v end
  return ""
end
local function count(v)
  if type(v) == "number" then return v end
  return 0
end
local meta = type(obj.metadata) == "table" and obj.metadata or {}
local spec = type(obj.spec) == "table" and obj.spec or {}
local status = type(obj.status) == "table" and obj.status or {}
local annotations = type(meta.annotations) == "table" and meta.annotations or {}
local strategy = type(spec.updateStrategy) == "table" and spec.updateStrategy or {}
local rolling = type(strategy.rollingUpdate) == "table" and strategy.rollingUpdate or nil
local replicas = type(spec.replicas) == "number" and spec.replicas or 1
local ready, updated = count(status.readyReplicas), count(status.updatedReplicas)
local held = text(annotations["allocguard.io/held-candidate"])
if meta.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "being deleted"
  return hs
end
if count(status.observedGeneration) == 0 or count(meta.generation) > count(status.observedGeneration) then
  hs.status = "Progressing"
  hs.message = "waiting for the StatefulSet controller to observe the spec"
  return hs
end
if held ~= "" then
  -- A hold pins the partition above any replica count (or records the hold
  -- under OnDelete): the controller's own figures would call it complete.
  hs.status = "Suspended"
  hs.message = "allocguard holds template " .. held .. " until its replay canary is Flat; " ..
    ready .. " of " .. replicas .. " pods ready on the current revision; " ..
    "allocguard gate statefulset/" .. text(meta.name) .. " says why"
  return hs
end
if ready < replicas then
  hs.status = "Progressing"
  hs.message = "waiting for " .. (replicas - ready) .. " pod(s) to be ready"
  return hs
end
if text(strategy.type) == "OnDelete" then
  hs.status = "Healthy"
  hs.message = ready .. " pod(s) ready (OnDelete: pods take a new template when deleted)"
  return hs
end
if rolling ~= nil and type(rolling.partition) == "number" then
  local want = replicas - rolling.partition
  if updated < want then
    hs.status = "Progressing"
    hs.message = "partitioned rollout: " .. updated .. " of " .. want .. " pod(s) updated"
    return hs
  end
  hs.status = "Healthy"
  hs.message = "partitioned rollout complete: " .. updated .. " pod(s) updated"
  return hs
end
if text(status.updateRevision) ~= text(status.currentRevision) then
  hs.status = "Progressing"
  hs.message = "rolling update: " .. updated .. " pod(s) at revision " .. text(status.updateRevision)
  return hs
end
hs.status = "Healthy"
hs.message = "rolling update complete: " .. ready .. " pod(s) at revision " .. text(status.currentRevision)
return hs
