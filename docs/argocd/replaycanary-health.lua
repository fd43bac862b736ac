-- Argo CD health of an allocguard.io ReplayCanary (docs/gitops.md).
local hs = {}
local function text(v)
  if type(v) == "string" then return v end
  return ""
end
local meta = type(obj.metadata) == "table" and obj.metadata or {}
local status = type(obj.status) == "table" and obj.status or {}
local phase, verdict, explanation = text(status.phase), text(status.verdict), text(status.explanation)
if meta.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = "being deleted"
  return hs
end
if phase ~= "Completed" and phase ~= "Failed" then
  hs.status = "Progressing"
  hs.message = "canary " .. (phase ~= "" and phase or "Pending")
  if explanation ~= "" then hs.message = hs.message .. ": " .. explanation end
  return hs
end
if phase == "Completed" and verdict == "Flat" then
  hs.status = "Healthy"
  hs.message = "Flat"
  if text(status.floorSlope) ~= "" then
    hs.message = hs.message .. " (floor slope " .. status.floorSlope .. ")"
  end
  return hs
end
hs.status = "Degraded"
hs.message = (verdict ~= "" and verdict or "no verdict") .. ": " .. explanation
if text(status.flatVariant) ~= "" then
  hs.message = hs.message .. "; variant " .. status.flatVariant .. " stayed flat"
end
return hs
