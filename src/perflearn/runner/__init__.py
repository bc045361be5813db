"""perflearn.runner"""
