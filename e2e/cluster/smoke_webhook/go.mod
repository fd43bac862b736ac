module allocguard.local/smoke-webhook

go 1.24
