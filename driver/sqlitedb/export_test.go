package sqlitedb

// StoreDir returns the store's root.
func StoreDir(d *Driver) string { return d.cfg.Store }
