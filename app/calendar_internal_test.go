package app

import "testing"

// TestLoadZoneShares: every load of a zone is one *time.Location, so a
// tenants file of many tenants in one zone holds its rules once.
func TestLoadZoneShares(t *testing.T) {
	t.Parallel()
	a, errA := loadZone("Pacific/Chatham")
	b, errB := loadZone("Pacific/Chatham")
	if errA != nil || errB != nil || a != b || a.String() != "Pacific/Chatham" {
		t.Errorf("two loads: %p %v, %p %v; want one zone", a, errA, b, errB)
	}
	if _, err := loadZone("Mars/Olympus_Mons"); err == nil {
		t.Error("an unknown zone loaded")
	}
}
