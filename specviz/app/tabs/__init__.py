"""The app's tabs: each builds its own components and wires its own events."""
