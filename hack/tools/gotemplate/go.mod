module minicvo/hack/tools/gotemplate

go 1.26
