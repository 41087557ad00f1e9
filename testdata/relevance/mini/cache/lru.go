package cache

import "container/list"

// Cache keeps at most Max entries and evicts the least recently used one
// when a new entry does not fit.
type Cache struct {
	Max   int
	order *list.List
	items map[string]*list.Element
}

// Get returns the value stored under key and marks it as recently used.
func (c *Cache) Get(key string) (any, bool) {
	e, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value, true
}
