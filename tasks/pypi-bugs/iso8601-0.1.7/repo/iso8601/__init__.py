from .iso8601 import *
