"""The CRTC's registration of telecommunications service providers: the flow, its letter, the
stand-in."""
