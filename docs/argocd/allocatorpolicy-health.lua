-- Argo CD health of an allocguard.io AllocatorPolicy (docs/gitops.md).
local hs = {}
if obj.status == nil or obj.status.conditions == nil then
  hs.status = "Progressing"
  hs.message = "waiting for the operator to read the policy"
  return hs
end
if obj.metadata.generation ~= nil and obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "the operator has not read generation " .. obj.metadata.generation .. " yet"
  return hs
end
local c = {}
for _, condition in ipairs(obj.status.conditions) do
  c[condition.type] = condition
end
if c.Ready == nil or c.Ready.status ~= "True" then
  hs.status = "Degraded"
  hs.message = c.Ready ~= nil and (c.Ready.reason .. ": " .. c.Ready.message) or "no Ready condition"
  return hs
end
if c.RolloutBlocked ~= nil and c.RolloutBlocked.status == "True" then
  hs.status = "Degraded"
  hs.message = "rollout " .. c.RolloutBlocked.message
  return hs
end
if c.InjectionDrift ~= nil and c.InjectionDrift.status == "True" then
  hs.status = "Degraded"
  hs.message = c.InjectionDrift.message
  return hs
end
hs.status = "Healthy"
hs.message = c.Ready.message
if c.RolloutBlocked ~= nil and c.RolloutBlocked.reason == "CanaryRunning" then
  hs.message = hs.message .. "; " .. c.RolloutBlocked.message
end
return hs
