"""The light client app builds use (`farm versions|select|show|pull|diff`): standard library and DVC only."""
