package main

import (
	"fmt"

	"benchmod/parse"
)

func main() {
	trees, err := parse.Parse("t", "{{.A}} {{range .B}}{{.}}{{end}}", "", "", map[string]any{})
	fmt.Println(len(trees), err)
}
