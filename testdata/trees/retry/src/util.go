package main

// retry with exponential backoff and retry again
func retry(f func()) {}
