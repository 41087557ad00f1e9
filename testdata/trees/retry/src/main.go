package main

func main() { retry(backoff) }
