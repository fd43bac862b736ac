-- Argo CD health of an apps/v1 DaemonSet, aware of allocguard's hold (docs/gitops.md).
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
local desired = count(status.desiredNumberScheduled)
local updated, available = count(status.updatedNumberScheduled), count(status.numberAvailable)
local held = text(annotations["allocguard.io/held-candidate"])
if meta.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "being deleted"
  return hs
end
if count(meta.generation) > count(status.observedGeneration) then
  hs.status = "Progressing"
  hs.message = "waiting for the DaemonSet controller to observe the spec"
  return hs
end
if held ~= "" then
  -- A hold switches a RollingUpdate DaemonSet to OnDelete (or records the hold
  -- under the user's own OnDelete), so no running pod is replaced.
  hs.status = "Suspended"
  hs.message = "allocguard holds template " .. held .. " until its replay canary is Flat; " ..
    updated .. " of " .. desired .. " pods on it (a pod deleted, or a node added, while held " ..
    "gets none until then); allocguard gate daemonset/" .. text(meta.name) .. " says why"
  return hs
end
if text(strategy.type) == "OnDelete" then
  hs.status = "Healthy"
  hs.message = updated .. " of " .. desired .. " pods updated (OnDelete: pods take a new template when deleted)"
  return hs
end
if updated < desired then
  hs.status = "Progressing"
  hs.message = "rollout: " .. updated .. " of " .. desired .. " pods updated"
  return hs
end
if available < desired then
  hs.status = "Progressing"
  hs.message = "rollout: " .. available .. " of " .. desired .. " updated pods available"
  return hs
end
hs.status = "Healthy"
hs.message = desired .. " pods updated and available"
return hs
