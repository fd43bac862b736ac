-- Argo CD health of an allocguard.io AllocatorPolicy (docs/gitops.md).
local hs = {}
local function text(v)
  if type(v) == "string" then return v end
  return ""
end
local meta = type(obj.metadata) == "table" and obj.metadata or {}
local status = type(obj.status) == "table" and obj.status or {}
if meta.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "being deleted"
  return hs
end
if type(status.conditions) ~= "table" then
  hs.status = "Progressing"
  hs.message = "waiting for the operator to read the policy"
  return hs
end
if meta.generation ~= nil and status.observedGeneration ~= meta.generation then
  hs.status = "Progressing"
  hs.message = "the operator has not read generation " .. tostring(meta.generation) .. " yet"
  return hs
end
local c = {}
for _, condition in ipairs(status.conditions) do
  if type(condition) == "table" and type(condition.type) == "string" then
    c[condition.type] = condition
  end
end
-- "Reason: message", or whichever of the two is there.
local function says(condition)
  local reason, message = text(condition.reason), text(condition.message)
  if reason ~= "" and message ~= "" then return reason .. ": " .. message end
  return reason .. message
end
if c.Ready == nil or c.Ready.status ~= "True" then
  hs.status = "Degraded"
  hs.message = c.Ready ~= nil and says(c.Ready) or "no Ready condition"
  if hs.message == "" then hs.message = "Ready is " .. tostring(c.Ready.status) end
  return hs
end
for _, problem in ipairs({ "InjectionFailing", "InjectionDrift" }) do
  if c[problem] ~= nil and c[problem].status == "True" then
    hs.status = "Degraded"
    hs.message = says(c[problem])
    return hs
  end
end
if c.RolloutBlocked ~= nil and c.RolloutBlocked.status == "True" then
  hs.status = "Suspended"
  hs.message = "rollout " .. text(c.RolloutBlocked.message)
  return hs
end
hs.status = "Healthy"
hs.message = text(c.Ready.message)
if c.RolloutBlocked ~= nil and c.RolloutBlocked.reason == "CanaryRunning" then
  hs.message = hs.message .. "; " .. text(c.RolloutBlocked.message)
end
return hs
