"""The fault lab: each fault reproduced on this machine, captured and classified for real."""
