module minicvo/hack/tools/standin

go 1.26.0
