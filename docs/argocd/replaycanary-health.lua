-- Argo CD health of an allocguard.io ReplayCanary (docs/gitops.md).
local hs = {}
local phase = obj.status ~= nil and obj.status.phase or nil
local verdict = obj.status ~= nil and obj.status.verdict or nil
if phase ~= "Completed" and phase ~= "Failed" then
  hs.status = "Progressing"
  hs.message = "canary " .. (phase or "Pending")
  if obj.status ~= nil and obj.status.explanation ~= nil then
    hs.message = hs.message .. ": " .. obj.status.explanation
  end
  return hs
end
local explanation = obj.status.explanation or ""
if phase == "Completed" and verdict == "Flat" then
  hs.status = "Healthy"
  hs.message = "Flat"
  if obj.status.floorSlope ~= nil then
    hs.message = hs.message .. " (floor slope " .. obj.status.floorSlope .. ")"
  end
  return hs
end
hs.status = "Degraded"
hs.message = (verdict or "no verdict") .. ": " .. explanation
if obj.status.flatVariant ~= nil then
  hs.message = hs.message .. "; variant " .. obj.status.flatVariant .. " stayed flat"
end
return hs
